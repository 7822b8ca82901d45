#!/usr/bin/python
"""Start reading the next launch's checkpoint into the page cache, and return at once."""

from __future__ import annotations

DOCUMENTATION = r"""
module: specsweep_prefetch
short_description: Read a checkpoint into the page cache in the background
description:
  - Finds the weight files of O(paths) (a file, or a folder's *.safetensors and *.gguf files) and,
    in a detached child process, asks the kernel to read each into the page cache
    (posix_fadvise POSIX_FADV_WILLNEED). Returns at once, before the reads finish; the sweep runs it
    as a launch's benchmark starts, so that the next launch reads its weights from memory.
  - Changes nothing the sweep measures; in check mode it only lists the files.
options:
  paths: {type: list, elements: path, required: true, description: Checkpoint files or folders.}
author: specsweep
"""

RETURN = r"""
files: {type: int, returned: always, description: Weight files asked for.}
bytes: {type: int, returned: always, description: Their size together.}
missing: {type: list, elements: str, returned: always, description: Paths that do not exist.}
"""

import os

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.specsweep_prefetch import checkpoint_files, willneed


def detach_and_prefetch(files: list[str]) -> None:
    """Ask for the files in a child of its own session: on slow storage the kernel may block the
    asking process while it queues the reads, and the benchmark must not wait for them."""
    if os.fork() != 0:
        return
    os.setsid()
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):  # the module's pipes: Ansible waits for them to close
        os.dup2(devnull, fd)
    try:
        willneed(files)
    finally:
        os._exit(0)


def main() -> None:
    module = AnsibleModule(
        argument_spec={"paths": {"type": "list", "elements": "path", "required": True}},
        supports_check_mode=True,
    )
    files, missing = checkpoint_files(module.params["paths"])
    size = sum(os.path.getsize(f) for f in files)
    if files and not module.check_mode:
        detach_and_prefetch(files)
    module.exit_json(changed=False, files=len(files), bytes=size, missing=missing)


if __name__ == "__main__":
    main()
