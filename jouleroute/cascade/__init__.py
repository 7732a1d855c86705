"""Cascades that read the answers: ask cheap candidates first, escalate when their answers disagree or fail.

Import from the modules (this package imports none of them, so reading a chain file, ``artifact``, costs no
math-verify import):

- ``agreement``: when two answers to one query are the same (each task's normalisation and grader equivalence):
  ``answers_agree``, ``agreement_bits``;
- ``matrix``: a split's outcomes plus each candidate's answer agreement and output length: ``cascade_matrix``,
  ``answers_missing``;
- ``chain``: a ``Chain`` of stages and ``simulate`` (per-query correctness, joules of every call, latency, stop);
- ``target`` / ``search``: ``CascadeTarget``; the family of chains scored on selection data (``search``), one
  chosen per target (``choose_chain``), the frontier (``pareto_points``);
- ``config``: ``evaluate.cascade`` (the targets by name, the stage size, the out-of-fold check);
- ``crossfit``: each target's rule scored out of fold on the selection data (``crossfit_targets``);
- ``score``: the chosen chain once on test against the best single (``score_chain``, ``decision_figure``);
- ``artifact``: the chain file the gateway serves (``ChainArtifact``).
"""
