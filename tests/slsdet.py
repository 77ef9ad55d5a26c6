"""The real slsReceiver 9.2.0 and a virtual detector server, started and stopped for tests.

The binaries come from ``AARE_LAB_SLSDET`` (a folder with ``bin/``) or PATH; `binaries`
says why they are missing. `Setup` starts a virtual server and a receiver on free ports
with a detector id of its own, configures them with the command-line client, and
`Setup.close` kills what it started and removes the client's shared memory. UDP frames of
our own go to the receiver with `send_frame`, packet by packet as a MÖNCH sends them
(layout in shared/tools/slsdet/README.md).
"""

from __future__ import annotations

import glob
import os
import shutil
import signal
import socket
import struct
import subprocess
import threading
import time
from pathlib import Path

#: ``sls_detector_header``: frameNumber, expLength, packetNumber, detSpec1, timestamp,
#: modId, row, column, detSpec2, detSpec3, detSpec4, detType, version.
PACKET_HEADER = struct.Struct("<QIIQQHHHHIHBB")
MOENCH_TYPE = 5
PACKET_DATA = 6400
NEEDED = ("slsReceiver", "moenchDetectorServer_virtual", "sls_detector_put",
          "sls_detector_get", "sls_detector_acquire")
CLIENT_TIMEOUT = 20.0
#: Held while a receiver is configured: at ``rx_hostname`` a receiver binds a test UDP
#: socket on the default port (50001), before ``udp_dstport`` moves it, so two receivers
#: configured at once can collide there ("Could not create a test UDP socket").
_CONFIGURING = threading.Lock()


def binaries() -> tuple[Path | None, str]:
    """The folder holding the binaries, or None and why not."""
    env = os.environ.get("AARE_LAB_SLSDET")
    if env:
        folder = Path(env) / "bin"
        missing = [name for name in NEEDED if not (folder / name).is_file()]
        if missing:
            return None, f"AARE_LAB_SLSDET={env} lacks bin/{', bin/'.join(missing)}"
        return folder, ""
    found = shutil.which(NEEDED[0])
    if found and all(shutil.which(name) for name in NEEDED):
        return Path(found).parent, ""
    return None, ("slsDetectorPackage binaries not found: set AARE_LAB_SLSDET to a folder "
                  "with bin/slsReceiver and the virtual servers, or put them on PATH")


def free_ports(n: int, kind=socket.SOCK_STREAM, step: int = 1) -> list[int]:
    """``n`` ports free for ``kind`` (``base, base + step, ...``), picked by the OS."""
    for _ in range(50):
        with socket.socket(socket.AF_INET, kind) as probe:
            probe.bind(("127.0.0.1", 0))
            base = probe.getsockname()[1]
        ports = [base + i * step for i in range(n)]
        if ports[-1] < 65536 and all(_free(p, kind) for p in ports):
            return ports
    raise RuntimeError("no free ports found")


def _free(port: int, kind) -> bool:
    with socket.socket(socket.AF_INET, kind) as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


class Setup:
    """A virtual MÖNCH server and a real slsReceiver, configured to stream over ZeroMQ.

    Parameters
    ----------
    interfaces
        UDP interfaces (1 or 2; MÖNCH streams one half of the frame per interface).
    frames, period
        What the virtual server sends on `acquire`.
    extra
        More ``(command, value)`` pairs for ``sls_detector_put``.

    Attributes
    ----------
    udp_ports, zmq_ports
        Where the receiver listens for UDP packets and publishes, one per interface.
    """

    def __init__(self, bin_dir: Path, workdir: Path, *, interfaces: int = 1,
                 frames: int = 10, period: str = "1ms", extra=()):
        self.bin = bin_dir
        self.workdir = workdir
        self.det_id = os.getpid() % 1000 * 10 + next(_ids) % 10 + 10
        self.processes: list[subprocess.Popen] = []
        try:
            server = free_ports(2)[0]  # the virtual server's stop server takes the next port
            receiver = free_ports(1)[0]
            self.udp_ports = free_ports(interfaces, socket.SOCK_DGRAM)
            self.zmq_ports = free_ports(interfaces)
            self._start("moenchDetectorServer_virtual", "-p", str(server))
            self._start("slsReceiver", "-t", str(receiver))
            for port in (server, server + 1, receiver):
                self._wait_listening(port)
            config = [("hostname", f"localhost:{server}"),
                      ("rx_hostname", f"localhost:{receiver}"),
                      ("numinterfaces", str(interfaces))]
            for i, port in enumerate(self.udp_ports):
                suffix = str(i + 1) if i else ""
                config += [(f"udp_dstport{suffix}", str(port)), (f"udp_dstip{suffix}", "auto")]
            config += [("rx_zmqport", str(self.zmq_ports[0])), ("rx_zmqhwm", "-1"),
                       ("rx_zmqstream", "1"), ("fwrite", "0"), ("frames", str(frames)),
                       ("period", period), *extra]
            # One client process reads them all: a put per command costs 0.3 s each.
            path = workdir / "setup.config"
            path.write_text("".join(f"{command} {value}\n" for command, value in config))
            with _CONFIGURING:
                self.put("config", str(path))
        except BaseException:
            self.close()
            raise

    @property
    def endpoints(self) -> list[str]:
        """The receiver's ZeroMQ PUB endpoints, one per interface."""
        return [f"tcp://127.0.0.1:{port}" for port in self.zmq_ports]

    def _start(self, name: str, *args: str) -> None:
        log = open(self.workdir / f"{name}.log", "wb")
        self.processes.append(subprocess.Popen(
            [str(self.bin / name), *args], cwd=self.workdir, stdout=log,
            stderr=subprocess.STDOUT, start_new_session=True))
        log.close()

    def _wait_listening(self, port: int, timeout: float = 10.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with socket.socket() as probe:
                if probe.connect_ex(("127.0.0.1", port)) == 0:
                    return
            for process in self.processes:
                if process.poll() is not None:
                    raise RuntimeError(f"{process.args[0]} exited: see {self.workdir}")
            time.sleep(0.05)
        raise RuntimeError(f"nothing listens on port {port} after {timeout} s")

    def _client(self, tool: str, *args: str) -> str:
        done = subprocess.run([str(self.bin / tool), f"{self.det_id}-{args[0]}", *args[1:]],
                              capture_output=True, text=True, timeout=CLIENT_TIMEOUT,
                              cwd=self.workdir)
        if done.returncode:
            raise RuntimeError(f"{tool} {' '.join(args)}: {done.stdout}{done.stderr}")
        return done.stdout

    def put(self, command: str, *values: str) -> str:
        """``sls_detector_put <id>-command values``."""
        return self._client("sls_detector_put", command, *values)

    def get(self, command: str) -> str:
        """The value ``sls_detector_get`` prints for ``command`` (the last word)."""
        return self._client("sls_detector_get", command).split()[-1]

    def acquire(self) -> None:
        """Let the virtual server send its frames through the receiver (blocks)."""
        subprocess.run([str(self.bin / "sls_detector_acquire"), f"{self.det_id}-"],
                       capture_output=True, timeout=CLIENT_TIMEOUT, check=True,
                       cwd=self.workdir)

    def close(self) -> None:
        """Kill the processes started and remove the client's shared memory."""
        for process in self.processes:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)
            process.wait(5)
        self.processes.clear()
        for path in glob.glob(f"/dev/shm/slsDetectorPackage_detector_{self.det_id}*"):
            os.remove(path)

    def __enter__(self) -> Setup:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


_ids = iter(range(10**9))


def send_frame(sock: socket.socket, port: int, frame, number: int, *, row: int = 0,
               column: int = 0, skip_packets=(), pause: float = 0.0) -> None:
    """Send one frame (or one interface's part of it) as MÖNCH UDP packets.

    Parameters
    ----------
    frame
        ``uint16`` image of this interface, its bytes cut into 6400-byte packets.
    number
        The frame number (slsDetector frames count from 1).
    skip_packets
        Packet numbers not sent, to make the frame short.
    """
    data = memoryview(frame.astype("<u2", copy=False).tobytes())
    for packet in range(len(data) // PACKET_DATA):
        if packet in skip_packets:
            continue
        header = PACKET_HEADER.pack(number, 0, packet, 0, 0, 0, row, column, 0, 0, 0,
                                    MOENCH_TYPE, 2)
        sock.sendto(header + data[packet * PACKET_DATA:(packet + 1) * PACKET_DATA],
                    ("127.0.0.1", port))
    if pause:
        time.sleep(pause)
