"""The only package that imports Ray: actors, placement, cluster set-up."""
