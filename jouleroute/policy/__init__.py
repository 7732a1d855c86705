"""What a user deploys, and the rules every kind of policy is chosen and judged by, each written once.

A *policy* is one of three kinds: ``single`` (one model answers every query), ``route`` (a router family at an
operating point λ) or ``cascade`` (a chain of stages that escalates on disagreement). Whatever the kind, it is
chosen and scored by the same four rules, which live here and nowhere else (tests/policy/test_rules_once.py fails
on a second copy):

- ``target``: the one target type (``energy_share``, ``accuracy_floor``, ``iso_accuracy``, ``above_best``);
- ``singles``: the best single (most accurate, ties to the cheaper) and the single model a target picks alone;
- ``meet``: the one rule that meets a target over a set of operating points (a router's λ grid, a cascade's
  chains, the contenders' deployed points);
- ``compare``: the one paired comparison of a policy with a reference single over the same queries, its
  bootstrap intervals and its verdict words.

``cascade_choice`` chooses chains with these rules (the cascade library keeps its search) and ``cascade_config``
is the ``evaluate.cascade`` params section. The package sits above ``routing`` and ``cascade`` and below the
evaluation and the gateway.
"""
