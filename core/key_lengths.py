"""How long the keys a trial is stored and looked up by may be: the widths of their columns.

A job's problem key (``M=1024,dtype=float16``: kernels/spec.py ``KernelSpec.problem_key``) and a trial's
config key (``16,8,2``: core/space.py ``SearchSpace.key``) are ``varchar`` columns of these widths in
PostgreSQL (core/models.py), counted in characters. A longer key failed its INSERT: a 500 at job
submission, a coordinator step that raised until the job failed. So what makes a kernel (an upload, a
job's space) checks its longest possible key against these, and refuses it with a reason instead.

They stay bounded rather than ``text``: both columns are in B-tree indexes (the best-config lookup, the
one-config-once constraint), whose entries PostgreSQL limits to 2704 bytes. That limit is in bytes, so it
binds a config key of non-ASCII text before its width does: 1024 CJK characters are 3072 bytes of UTF-8,
and the INSERT failed with "index row size 3088 exceeds btree version 4 maximum 2704". Next to the job
id and the entry's headers, 2672 bytes of incompressible key fit; :data:`CONFIG_KEY_BYTES` leaves room.
An uploaded kernel's problem key is ASCII (its names are ASCII identifiers, its string values PROBLEM_TEXT),
so its width binds first.
"""

from __future__ import annotations

PROBLEM_KEY_LENGTH = 512
CONFIG_KEY_LENGTH = 1024
CONFIG_KEY_BYTES = 2600
