"""A sweep while it runs, read from the facts on disk: where it stands and what racing decides.

Above analysis.facts (it reads facts) and analysis.sweep (it follows the plan's order and claims),
so the sweep's own modules never import facts.
"""
