"""The workers' process substrate: backends, sandboxes, pools, the job loop, and one variant's run."""
