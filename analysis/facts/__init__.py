"""Result facts: the schema on disk, its writer, and the loader into tidy frames."""
