# Source this on the offline GPU host, from the repository root, with .bundle carried:
#   source scripts/gpu_env.sh
# It unpacks the Vulkan loader into /, the shader toolchain into a private prefix, the wheels into
# a private site dir, and exports what vkcoop needs. Idempotent.
_vkcoop_root=$(pwd)
for f in "$_vkcoop_root"/.bundle/host-debs/*.deb; do dpkg -x "$f" /; done
ldconfig
export VKCOOP_TOOLCHAIN_DIR=/tmp/vkcoop-toolchain
if [ ! -e "$VKCOOP_TOOLCHAIN_DIR/.complete" ]; then
  mkdir -p "$VKCOOP_TOOLCHAIN_DIR"
  for f in "$_vkcoop_root"/.bundle/toolchain-debs/*.deb; do dpkg -x "$f" "$VKCOOP_TOOLCHAIN_DIR"; done
  touch "$VKCOOP_TOOLCHAIN_DIR/.complete"
fi
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/vkcoop-site \
  "$_vkcoop_root"/.bundle/wheels/*.whl
export PYTHONPATH="$_vkcoop_root:/tmp/vkcoop-site${PYTHONPATH:+:$PYTHONPATH}"
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
# The validation layer comes from the toolchain prefix (a newer Debian build; glibc 2.39 there runs it natively).
# Its manifest names the library without a path, and LD_LIBRARY_PATH can't point into the prefix (it holds a
# newer glibc), so a copy of the manifest names it absolutely.
mkdir -p /tmp/vkcoop-layer
sed "s#\"libVkLayer_khronos_validation.so\"#\"$VKCOOP_TOOLCHAIN_DIR/usr/lib/x86_64-linux-gnu/libVkLayer_khronos_validation.so\"#" \
  "$VKCOOP_TOOLCHAIN_DIR/usr/share/vulkan/explicit_layer.d/VkLayer_khronos_validation.json" \
  >/tmp/vkcoop-layer/VkLayer_khronos_validation.json
export VK_ADD_LAYER_PATH=/tmp/vkcoop-layer
export PYTHONUNBUFFERED=1
unset _vkcoop_root
