"""The learned LM router: spec and prompt, one-pass label scoring, inference, MLflow pyfunc."""
