"""The repro family: minimise a cluster's representative, write a reproducer and a report."""
