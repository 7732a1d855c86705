"""Cascades that read the answers: ask cheap candidates first, escalate when their answers disagree or fail.

Import from the modules (this package imports none of them, so reading a chain file, ``artifact``, costs no
math-verify import):

- ``agreement``: when two answers to one query are the same (each task's normalisation and grader equivalence):
  ``answers_agree``, ``agreement_bits``;
- ``matrix``: a split's outcomes plus each candidate's answer agreement and output length: ``cascade_matrix``,
  ``answers_missing``;
- ``chain``: a ``Chain`` of stages and ``simulate`` (per-query correctness, joules of every call, latency, stop);
- ``search``: the family of chains scored on selection data (``search``) and its frontier (``pareto``,
  ``pareto_points``). Choosing a chain per target, checking the rule out of fold and scoring it on test are the
  policy layer's (jouleroute/policy/cascade_choice.py), by the rules every kind of policy shares;
- ``artifact``: the chain file the gateway serves (``ChainArtifact``).
"""
