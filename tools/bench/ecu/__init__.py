"""ecubench's parts: the ECU envelope, a system under test, manifests, scenarios."""
