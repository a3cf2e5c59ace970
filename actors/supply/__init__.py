"""Supply-chain pinning of stdio backends: `prepare` installs a package backend once and records digests in
a lock file beside the config; every spawn checks them (pins.py) and refuses a backend that drifted."""

from actors.supply.lockfile import LockEntry as LockEntry
from actors.supply.lockfile import cache_folder as cache_folder
from actors.supply.lockfile import lock_path as lock_path
from actors.supply.lockfile import read_lock as read_lock
from actors.supply.lockfile import write_lock as write_lock
from actors.supply.pins import PinMismatchError as PinMismatchError
from actors.supply.pins import Prepared as Prepared
from actors.supply.pins import cache_paths as cache_paths
from actors.supply.pins import offline_env as offline_env
from actors.supply.pins import pinned as pinned
from actors.supply.prepare import PrepareError as PrepareError
from actors.supply.prepare import prepare as prepare
