#!/bin/sh
# tests/numa/vm.sh BINARY — run BINARY as init's only job on a two-node NUMA virtual
# machine (qemu, software emulation) and print its console. Exit 0 only when the guest
# printed "NUMA-CHECK PASS". Recipe: shared/recipes/numa-vm.md.
#
# Needs root (debootstrap, mke2fs -d). The guest's root file system is built once and
# cached in $FIBERD_NUMA_ROOT (default /var/tmp/fiberd-numa-root); each run copies the
# binary in and boots in about 15-60 s. Every step is bounded in time.
set -eu
bin=$1
root=${FIBERD_NUMA_ROOT:-/var/tmp/fiberd-numa-root}
img=${FIBERD_NUMA_IMG:-/var/tmp/fiberd-numa.img}
log=${FIBERD_NUMA_LOG:-/var/tmp/fiberd-numa.log}

if [ "$(id -u)" -ne 0 ]; then
	echo "check-numa: needs root (debootstrap, qemu image)" >&2
	exit 77
fi
for tool in debootstrap qemu-system-x86_64 mke2fs; do
	command -v "$tool" >/dev/null || { echo "check-numa: $tool missing (make deps-numa)" >&2; exit 69; }
done

if [ ! -e "$root/.fiberd-ready" ]; then
	echo "check-numa: building the guest root in $root (once; a few minutes)"
	rm -rf "$root"
	timeout 1200 debootstrap --variant=minbase --include=numactl bookworm "$root" >/dev/null
	timeout 1200 chroot "$root" sh -c 'DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends linux-image-cloud-amd64 >/dev/null'
	touch "$root/.fiberd-ready"
fi

install -m755 "$bin" "$root/numa-check"
cat >"$root/probe.sh" <<'PROBE'
#!/bin/sh
mount -t proc proc /proc
mount -t sysfs sys /sys
numactl --hardware
/numa-check
echo "numa-check exit=$?"
echo o > /proc/sysrq-trigger
sleep 60 # the power-off is asynchronous: init must not exit (a panic) before it
PROBE
chmod 755 "$root/probe.sh"
rm -f "$img"
mke2fs -q -t ext4 -d "$root" "$img" 3G
kernel=$(ls "$root"/boot/vmlinuz-* | head -n1)
initrd=$(ls "$root"/boot/initrd.img-* | head -n1)
# Two nodes of one CPU each: with -smp 4 the guest ran but did not power off (recipe).
timeout 300 qemu-system-x86_64 -accel tcg,thread=multi -cpu max -m 2048 -smp 2 \
	-object memory-backend-ram,id=m0,size=1024M -object memory-backend-ram,id=m1,size=1024M \
	-numa node,nodeid=0,cpus=0,memdev=m0 -numa node,nodeid=1,cpus=1,memdev=m1 \
	-kernel "$kernel" -initrd "$initrd" \
	-append "root=/dev/vda rw console=ttyS0 init=/probe.sh quiet panic=1" \
	-drive file="$img",format=raw,if=virtio -nographic -no-reboot >"$log" 2>&1 || true
grep -aE 'available:|node [0-9]+ cpus|numa-check|NUMA-CHECK|check:|fiber stacks' "$log" || true
grep -aq 'NUMA-CHECK PASS' "$log"
