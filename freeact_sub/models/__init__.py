"""Models: the options a person picks from, one model request, and retries of provider faults."""
