"""The stages the DAG runs and the commands users call; none imports another (tests/test_structure.py)."""
