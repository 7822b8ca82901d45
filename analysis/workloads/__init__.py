"""The traffic a sweep sends: shipped benchmark sets (chat, code, math, long) and the operator's own file."""
