"""Labels without gold: how a candidate's answer is marked correct when the queries carry no gold answer.

A user's own prompts (``prompts``: an OpenAI chat-completions JSONL or a parquet with a prompt column) become a
query table without gold. Each candidate's answer is then labelled by a policy (``policies``): ``reference`` (it
agrees with a named candidate's answer), ``vote`` (it agrees with the pool's plurality answer) or ``gold`` (the
grader's own), and a user's ``feedback`` scores override any of them. Every labelled row carries its
``label_source`` the way every energy number carries its ``energy_source`` (``sources``); ``quality`` measures
labels against gold where gold exists.
"""
