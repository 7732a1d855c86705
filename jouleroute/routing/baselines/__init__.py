"""The baseline routers: always-X, random, oracle, and the learned kNN / MLP / MF over sentence embeddings.

Each lives in its own module (simple.py, knn.py, mlp.py, mf.py; the learned ones share
learned.py); ``jouleroute.routing.registry`` names them. See docs/baselines.md.
"""
