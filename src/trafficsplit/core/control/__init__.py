"""Control-time work for TrafficSplits, run when something changes (a resource, a weight, a replica's ACK).

The TrafficSplit YAML parser (`spec`), backend references (`resolve`), the compiler (`compiler`: specs → compiled
splits → a generation's content), the desired state (`reconcile`), status and its conditions (`status`), and the
planning tools the CLI shares (`plan`, `change`, `simulate`). Stands on the model and the request-time decisions.
"""
