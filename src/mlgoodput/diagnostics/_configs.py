"""Run configs: the user's (a dict or YAML/JSON files) and the ones collected automatically.

Everything is turned into plain JSON values at the call, so a config that cannot be
stored fails at `machinelearning_run` rather than later in a background thread.
"""

from __future__ import annotations

import json
import os
import platform
import socket
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

_PACKAGES = (
    "jax",
    "jaxlib",
    "libtpu",
    "torch",
    "torch_xla",
    "tensorflow",
    "flax",
    "optax",
    "orbax-checkpoint",
    "numpy",
    "mlgoodput",
)


def load_configs(configs: object, arg: str = "configs") -> dict[str, Any]:
    """A dict of JSON values from a mapping, a YAML/JSON file path, or a list of either (merged in order)."""
    if configs is None:
        return {}
    if isinstance(configs, Mapping):
        return {_key(k, arg): to_json(v, f"{arg}[{k!r}]") for k, v in configs.items()}
    if isinstance(configs, str) and "://" in configs and not configs.startswith("file://"):
        return load_configs(_read_url(configs, arg), arg)
    if isinstance(configs, (str, os.PathLike)):
        path = os.fspath(configs)
        # errors inside the file's values name the file too
        return load_configs(_read_file(Path(path.removeprefix("file://")), arg), f"{arg} (file {path!r})")
    if isinstance(configs, Sequence) and not isinstance(configs, (bytes, bytearray)):
        out: dict[str, Any] = {}
        for i, part in enumerate(configs):
            out.update(load_configs(part, f"{arg}[{i}]"))
        return out
    raise TypeError(f"{arg} must be a dict, a path to a YAML or JSON file, or a list of those, got {configs!r}")


def _key(k: object, arg: str) -> str:
    if isinstance(k, str):
        return k
    if isinstance(k, (int, float, bool)):
        return str(k)
    raise TypeError(f"{arg}: config keys must be strings, got {k!r}")


def _read_url(url: str, arg: str) -> object:
    """A YAML/JSON config file at an fsspec URL (gs://, s3://, memory://, ...)."""
    try:
        import fsspec
    except ImportError as e:
        raise ImportError(
            f"{arg}={url!r} needs fsspec (and its backend, e.g. gcsfs): pip install 'mlgoodput[diagnostics]'"
        ) from e
    suffix = os.path.splitext(url.split("?", 1)[0])[1].lower()
    _check_suffix(suffix, url, arg)
    try:
        with fsspec.open(url, "r", encoding="utf-8") as f:
            text = f.read()
    except ImportError as e:
        raise ImportError(f"{arg}={url!r}: {e} (for gs:// URLs: pip install 'mlgoodput[gcs]')") from e
    except Exception as e:
        raise ValueError(f"{arg}: cannot read config file {url!r}: {e}") from e
    return _parse(text, suffix, url, arg)


def _check_suffix(suffix: str, where: str, arg: str) -> None:
    if suffix not in (".json", ".yaml", ".yml"):
        raise ValueError(f"{arg}: a config file must end in .json, .yaml or .yml, got {where!r}")


def _read_file(path: Path, arg: str) -> object:
    suffix = path.suffix.lower()
    _check_suffix(suffix, str(path), arg)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as e:
        raise ValueError(f"{arg}: cannot read config file {str(path)!r}: {e}") from e
    return _parse(text, suffix, str(path), arg)


def _parse(text: str, suffix: str, where: str, arg: str) -> object:
    try:
        if suffix == ".json":
            data: object = json.loads(text)
        else:
            try:
                import yaml
            except ImportError as e:
                raise ImportError("YAML configs need PyYAML: pip install 'mlgoodput[diagnostics]'") from e
            data = yaml.safe_load(text)
    except ImportError:
        raise
    except Exception as e:  # json.JSONDecodeError (a ValueError) or yaml.YAMLError
        if isinstance(e, ValueError) or type(e).__module__.startswith("yaml"):
            raise ValueError(f"{arg}: {where!r} is not valid {suffix[1:].upper()}: {e}") from e
        raise
    if data is None:
        return {}
    if not isinstance(data, Mapping):
        raise ValueError(f"{arg}: {where!r} must hold a mapping at the top, got {type(data).__name__}")
    return data


def to_json(value: object, arg: str) -> Any:
    """A config value as JSON: numbers, strings, bools, None, lists and dicts; numpy scalars
    and arrays via `.tolist()`; paths and enums as strings. Anything else is a TypeError."""
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if value == value and abs(value) != float("inf") else str(value)
    if isinstance(value, Mapping):
        return {_key(k, arg): to_json(v, f"{arg}[{k!r}]") for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [to_json(v, f"{arg}[{i}]") for i, v in enumerate(value)]
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    tolist = getattr(value, "tolist", None)  # numpy scalars and arrays
    if callable(tolist):
        return to_json(tolist(), arg)
    import enum

    if isinstance(value, enum.Enum):
        return to_json(value.value, arg)
    raise TypeError(f"{arg}: config values must be JSON-like (numbers, strings, lists, dicts), got {value!r}")


def software_configs(preferred: str | None = None) -> dict[str, Any]:
    """The framework in use and its version (one the program imported, never a default;
    `preferred` breaks a tie), XLA flags, Python and key package versions (no imports)."""
    from mlgoodput.diagnostics._provenance import framework_in_use, package_versions

    versions = package_versions(_PACKAGES)
    framework = framework_in_use(preferred)
    return {
        "framework": framework,
        "framework_version": versions.get(framework) if framework else None,
        "xla_flags": os.environ.get("XLA_FLAGS", ""),
        "libtpu_init_args": os.environ.get("LIBTPU_INIT_ARGS", ""),
        "python_version": platform.python_version(),
        "packages": versions,
    }


def system_configs(process_index: int) -> dict[str, Any]:
    """Host name, CPU count and the accelerators JAX (or PyTorch) already sees in this process.

    Frameworks are asked only when the program has imported them, so creating a run never
    initializes a backend on its own.
    """
    out: dict[str, Any] = {
        "hostname": socket.gethostname(),
        "platform": platform.platform(),
        "cpu_count": os.cpu_count(),
        "process_index": process_index,
        "pid": os.getpid(),
    }
    if "jax" in sys.modules:
        try:
            import jax

            devs = jax.devices()
            out.update(
                device_kind=devs[0].device_kind if devs else None,
                device_platform=devs[0].platform if devs else None,
                device_count=len(devs),
                local_device_count=jax.local_device_count(),
                process_count=jax.process_count(),
                jax_process_index=jax.process_index(),
                num_slices=len({getattr(d, "slice_index", 0) for d in devs}) if devs else 0,
            )
        except Exception as e:  # a broken backend must not stop the run
            out["device_error"] = f"{type(e).__name__}: {e}"
    elif "torch" in sys.modules:
        try:
            import torch  # type: ignore[import-not-found,unused-ignore]

            if torch.cuda.is_available():
                out.update(
                    device_kind=torch.cuda.get_device_name(0),
                    device_platform="gpu",
                    local_device_count=torch.cuda.device_count(),
                )
            if torch.distributed.is_available() and torch.distributed.is_initialized():
                out["process_count"] = torch.distributed.get_world_size()
        except Exception as e:
            out["device_error"] = f"{type(e).__name__}: {e}"
    return out
