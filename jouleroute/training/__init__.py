"""Router training: datasets (router_data), rewards, SFT and GRPO stages, held-out label checks.

Stage functions: ``router_data.run_router_data``, ``sft.run_sft``, ``grpo.run_grpo``.
Nothing heavy (torch, TRL, MLflow) is imported by this package itself.
"""
