"""Backend detection is lazy and quiet: importing hologram opens no GPU API, asking about CUDA
does not start the Vulkan loader, and driver chatter while wgpu probes adapters (Mesa's
"XDG_RUNTIME_DIR is invalid or not set" without a desktop session) stays out of stderr.

Each case runs in a fresh interpreter, so what it loads and prints is its own."""

import os
import subprocess
import sys

import pytest

LINUX = sys.platform.startswith("linux")


def run(code: str, **env_changes) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    env.pop("XDG_RUNTIME_DIR", None)
    env.pop("HOLOGRAM_BACKEND", None)
    env.pop("HOLOGRAM_WGPU_SHOW_DRIVER_OUTPUT", None)
    env.update(env_changes)
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)


LOADED_VULKAN = "any('libvulkan' in line for line in open('/proc/self/maps'))"


def test_import_prints_nothing_and_opens_no_gpu_api():
    r = run(f"import hologram\nprint({LOADED_VULKAN if LINUX else False})")
    assert r.returncode == 0, r.stderr
    assert r.stderr == ""
    assert r.stdout.strip() == "False"


@pytest.mark.skipif(not LINUX, reason="reads /proc/self/maps")
def test_asking_about_cuda_does_not_start_vulkan():
    r = run(f"import hologram as hg\nhg.is_cuda_available()\nprint({LOADED_VULKAN})")
    assert r.returncode == 0, r.stderr
    assert r.stderr == ""
    assert r.stdout.strip() == "False"


def test_detection_without_xdg_runtime_dir_prints_nothing():
    code = (
        "import hologram as hg\n"
        "hg.is_cuda_available(); hg.is_vulkan_available(); hg.get_default_backend()\n"
        "hg.backend.available_backends(); hg.Executor('auto')\n"
        "print(hg.get_default_backend())\n"
    )
    r = run(code)
    assert r.returncode == 0, r.stderr
    assert r.stderr == "", r.stderr
    assert r.stdout.strip() in ("cpu", "cuda", "vulkan", "metal", "dx12")


def software_vulkan_reason():
    r = run("import hologram as hg\nprint(hg._native.backend_status('vulkan'))", HOLOGRAM_WGPU_ALLOW_SOFTWARE="1")
    return r.stdout.strip()


def test_the_vulkan_backend_on_a_software_adapter_still_works_quietly():
    status = software_vulkan_reason()
    if not status.startswith("(True"):
        pytest.skip(f"no Vulkan adapter here: {status}")
    code = (
        "import numpy as np, hologram as hg\n"
        "ex = hg.Executor('vulkan')\n"
        "x = np.arange(64, dtype=np.float32)\n"
        "a, c = ex.allocate(64), ex.allocate(64)\n"
        "a.from_numpy(x)\n"
        "hg.ops.vector_add(ex, a, a, c)\n"
        "assert (c.to_numpy() == 2 * x).all()\n"
        "print(ex.backend, hg.ops.sum(ex, c))\n"
    )
    r = run(code, HOLOGRAM_WGPU_ALLOW_SOFTWARE="1")
    assert r.returncode == 0, r.stderr
    assert r.stderr == "", r.stderr
    assert r.stdout.split() == ["vulkan", str(float(2 * sum(range(64))))]


@pytest.mark.skipif(not LINUX, reason="the message comes from Mesa on Linux")
def test_driver_output_can_be_left_on_stderr():
    status = software_vulkan_reason()
    if not status.startswith("(True"):
        pytest.skip(f"no Vulkan adapter here: {status}")
    # Mesa's device-select layer asks Wayland for the desktop's GPU while adapters are listed;
    # without XDG_RUNTIME_DIR, libwayland says so on stderr.
    layer = "/usr/share/vulkan/implicit_layer.d/VkLayer_MESA_device_select.json"
    if not os.path.exists(layer):
        pytest.skip("no Mesa device-select layer: the drivers here may print nothing")
    quiet = run("import hologram as hg\nhg.is_vulkan_available()")
    shown = run("import hologram as hg\nhg.is_vulkan_available()", HOLOGRAM_WGPU_SHOW_DRIVER_OUTPUT="1")
    assert quiet.returncode == 0 and shown.returncode == 0, quiet.stderr + shown.stderr
    assert quiet.stderr == ""
    assert "XDG_RUNTIME_DIR" in shown.stderr
