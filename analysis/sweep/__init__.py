"""What a sweep is: its configs, the request that asks for them, and the plan hosts receive."""
