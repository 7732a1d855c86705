"""The loop from serving back to learning (issue 49): what the gateway captured becomes the next tournament's
queries, and a new policy replaces the serving one only through the gate (``gate``)."""
