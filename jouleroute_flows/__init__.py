"""Prefect orchestration for jouleroute: thin, versioned wrappers around the library's stage functions."""
