#!/usr/bin/python
"""Install text files in one round trip: each written only where it is absent or different."""

from __future__ import annotations

DOCUMENTATION = r"""
module: specsweep_files
short_description: Write a set of text files whose content the controller sends, in one call
description:
  - Each of O(files) whose host file is absent, holds other bytes or has another mode is written
    (a temporary file beside it, then renamed over it, so a reader never sees half a file) or has
    its mode set; a missing folder is made (0755). The rest are left alone, so a host that has them
    all changes nothing.
  - One call for all of them, where ansible.builtin.copy in a loop makes two per file (a stat, then
    the copy), which on a fresh host was most of the benchmark client's install.
  - A content is never shown (no_log, and no diff), as it may be an operator's own prompts.
  - In check mode nothing is written; C(written) says what would be.
options:
  files:
    type: list
    elements: dict
    required: true
    description: The files to install.
    suboptions:
      dest: {type: path, required: true, description: The host path.}
      content: {type: str, required: true, no_log: true, description: The text it must hold (UTF-8).}
      mode: {type: str, required: true, description: Its permissions in octal (for example C(0644)).}
author: specsweep
"""

RETURN = r"""
written:
  type: list
  elements: str
  returned: always
  description: The paths written or whose mode was set (in check mode, those that would be).
"""

import os
import stat
import tempfile

from ansible.module_utils.basic import AnsibleModule


def current(path: str) -> tuple[bytes, int] | None:
    """The bytes and permission bits of `path`, or None when it is absent."""
    try:
        with open(path, "rb") as f:
            return f.read(), stat.S_IMODE(os.fstat(f.fileno()).st_mode)
    except FileNotFoundError:
        return None


def write(path: str, data: bytes, mode: int) -> None:
    """`data` at `path` with `mode`, by rename: a crash leaves the old file or the new, never half."""
    folder = os.path.dirname(path)
    if not os.path.isdir(folder):
        os.makedirs(folder)
        os.chmod(folder, 0o755)
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".specsweep-")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            os.fchmod(f.fileno(), mode)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def install(files: list[dict], check: bool) -> list[str]:
    """Write each file that is absent or different -> the paths written (or, with `check`, to write)."""
    written = []
    for f in files:
        data, mode = f["content"].encode("utf-8"), int(f["mode"], 8)
        found = current(f["dest"])
        if found == (data, mode):
            continue
        written.append(f["dest"])
        if check:
            continue
        if found is not None and found[0] == data:
            os.chmod(f["dest"], mode)
        else:
            write(f["dest"], data, mode)
    return written


def octal(mode: str) -> bool:
    """Whether `mode` is octal permission bits (0000 to 7777)."""
    try:
        return 0 <= int(mode, 8) <= 0o7777
    except ValueError:
        return False


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "files": {
                "type": "list",
                "elements": "dict",
                "required": True,
                "options": {
                    "dest": {"type": "path", "required": True},
                    "content": {"type": "str", "required": True, "no_log": True},
                    "mode": {"type": "str", "required": True},
                },
            }
        },
        supports_check_mode=True,
    )
    bad = [f["mode"] for f in module.params["files"] if not octal(f["mode"])]
    if bad:
        module.fail_json(msg=f"mode must be octal permissions such as 0644, got {bad[0]!r}")
    try:
        written = install(module.params["files"], module.check_mode)
    except OSError as exc:
        module.fail_json(msg=f"could not write {exc.filename}: {exc.strerror}")
    module.exit_json(changed=bool(written), written=written)


if __name__ == "__main__":
    main()
