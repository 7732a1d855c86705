"""The LM router as a cascade's verifier (issue 42, item 4): accept the first stage's answer or escalate.

A cascade that reads answers (jouleroute/cascade) accepts a cheap stage when two cheap models agree. Here the
paper's router decides instead: it reads the query and the first stage's answer and routes over two choices,
``accept`` (the first model's answer and joules) and ``escalate`` (the final model's answer, the joules of
both calls), trained with the router's own recipe (router_data -> SFT -> GRPO, reward correctness − λ·joules).

Modules, read top to bottom:

- ``config``: the study's typed settings (unknown keys rejected);
- ``stages``: the first and final model and the agreement chain, chosen on selection data (train + val);
- ``derived``: the two-choice profile and its query text (question, the first model's work and answer);
- ``train``: router_data, SFT and GRPO of the library on it; the verifier's scores and estimated joules;
- ``compare``: the threshold chosen on val at the agreement chain's energy, scored once on test;
- ``page``: docs/cascade-verifier.md from the figures' JSON.

It lives under experiments/ because it reads a finished study's artifacts and reaches across the library's
peer packages (cascade, training, evaluation), which the library's layers forbid to each other.
"""
