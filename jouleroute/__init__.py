"""jouleroute."""
