"""Several hosts on one machine, for the scale-out test: Linux network namespaces on a private
subnet, and TCP relays on the host side of it.

`Network()` makes a bridge on the host (the subnet's `.1`, the gateway) and `add_host(role)` a
namespace wired into it by a veth pair, with an address of its own and a default route through
the gateway. The host's services listen on 127.0.0.1, which a namespace cannot reach (it has a
loopback of its own), so `Relay` forwards ports of the gateway address to them; it also serves
the round-robin balancer in front of the web hosts. Names carry a random tag, so a run never
meets another run's leftovers, and `close()` removes everything, also after a failure.
"""

import asyncio
import ipaddress
import itertools
import os
import secrets
import shutil
import signal
import subprocess
import threading
from collections import Counter
from dataclasses import dataclass, field


def ip(*args: str) -> str:
    """`ip <args>`; a failure raises with ip's own message."""
    done = subprocess.run(["ip", *args], capture_output=True, text=True)
    if done.returncode:
        raise RuntimeError(f"ip {' '.join(args)}: {done.stderr.strip()}")
    return done.stdout


def netns_available() -> bool:
    """Namespaces can be made here: `ip` is installed and this process is root."""
    return shutil.which("ip") is not None and os.geteuid() == 0


def free_subnet() -> ipaddress.IPv4Network:
    """A random 10.x.y.0/24 that no address or route of this machine is in."""
    taken = []
    for word in (ip("-4", "-o", "addr") + ip("-4", "route")).split():
        if "." in word:
            try:
                taken.append(ipaddress.ip_network(word, strict=False))
            except ValueError:  # a word of the listing that is no address
                pass
    for _ in range(100):
        subnet = ipaddress.ip_network(
            f"10.{secrets.randbelow(150) + 100}.{secrets.randbelow(256)}.0/24"
        )
        if not any(subnet.overlaps(other) for other in taken):
            return subnet
    raise RuntimeError("no free 10.x.y.0/24 subnet")


@dataclass
class Host:
    """One namespace: its role, name and address on the subnet, the processes started in it."""

    role: str
    namespace: str
    address: str
    link: str  # the host end of its veth pair
    processes: list[subprocess.Popen] = field(default_factory=list)
    gone: bool = False

    def start(self, argv: list[str], *, env: dict, cwd, log) -> subprocess.Popen:
        """Run `argv` inside this host, in a process group of its own (so a kill takes its
        children too)."""
        process = subprocess.Popen(
            ["ip", "netns", "exec", self.namespace, *argv],
            env=env,
            cwd=cwd,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        self.processes.append(process)
        return process

    def commands(self) -> list[str]:
        """The command line of every process in this namespace."""
        lines = []
        for pid in ip("netns", "pids", self.namespace).split():
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as cmdline:
                    lines.append(cmdline.read().replace(b"\0", b" ").decode().strip())
            except FileNotFoundError:  # exited meanwhile
                pass
        return lines

    def kill(self) -> None:
        """The host dies at once: SIGKILL to every process group, then its namespace goes."""
        for process in self.processes:
            if process.poll() is None:
                try:
                    os.killpg(process.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            process.wait(timeout=10)
        if not self.gone:
            # The pair goes with either end: deleted here, not left to the namespace's end,
            # which the kernel may keep a while after the namespace is deleted.
            subprocess.run(["ip", "link", "del", self.link], capture_output=True)
            subprocess.run(["ip", "netns", "del", self.namespace], capture_output=True)
            self.gone = True


class Network:
    """A bridge with the gateway address and the hosts' namespaces on it."""

    def __init__(self):
        self.tag = secrets.token_hex(3)
        self.subnet = free_subnet()
        addresses = self.subnet.hosts()
        self.gateway = str(next(addresses))
        self._addresses = addresses
        self.bridge = f"ao{self.tag}"
        self.hosts: dict[str, Host] = {}
        ip("link", "add", self.bridge, "type", "bridge")
        try:
            ip("addr", "add", f"{self.gateway}/{self.subnet.prefixlen}", "dev", self.bridge)
            ip("link", "set", self.bridge, "up")
        except RuntimeError:
            self.close()
            raise

    def add_host(self, role: str) -> Host:
        index = len(self.hosts)
        namespace = f"agent-org-{self.tag}-{role}"
        outside, inside = f"ao{self.tag}h{index}", f"ao{self.tag}n{index}"
        address = str(next(self._addresses))
        ip("netns", "add", namespace)
        self.hosts[role] = host = Host(role, namespace, address, outside)
        ip("link", "add", outside, "type", "veth", "peer", "name", inside, "netns", namespace)
        ip("link", "set", outside, "master", self.bridge, "up")
        inner = ("-n", namespace)
        ip(*inner, "link", "set", "lo", "up")
        ip(*inner, "addr", "add", f"{address}/{self.subnet.prefixlen}", "dev", inside)
        ip(*inner, "link", "set", inside, "up")
        ip(*inner, "route", "add", "default", "via", self.gateway)
        return host

    def close(self) -> None:
        """Every process killed, every namespace deleted (their veth pairs go with them), the
        bridge deleted."""
        for host in self.hosts.values():
            host.kill()
        subprocess.run(["ip", "link", "del", self.bridge], capture_output=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class Listener:
    """One listening port of a `Relay`: each connection goes to the next upstream in turn."""

    def __init__(self, upstreams: list[tuple[str, int]]):
        self.upstreams = upstreams
        self._next = itertools.cycle(upstreams)
        self.port = 0
        self.served: Counter[tuple[str, int]] = Counter()
        # Per open connection: its client's address, and whether the client spoke last (a
        # request sent, no answer yet: a call in flight, for HTTP/1.1).
        self._open: dict[int, list] = {}
        self.writers: set[asyncio.StreamWriter] = set()

    def awaiting_answer(self) -> Counter[str]:
        """Per client address, its open connections that wait for an answer."""
        return Counter(peer for peer, waiting in list(self._open.values()) if waiting)

    async def serve(self, client_reader, client_writer) -> None:
        upstream = next(self._next)
        try:
            upstream_reader, upstream_writer = await asyncio.open_connection(*upstream)
        except OSError:
            client_writer.transport.abort()
            return
        self.served[upstream] += 1
        self.writers |= {client_writer, upstream_writer}
        key = id(client_writer)
        state = self._open[key] = [client_writer.get_extra_info("peername")[0], False]

        async def pipe(reader, writer, client_spoke: bool):
            try:
                while data := await reader.read(65536):
                    state[1] = client_spoke
                    writer.write(data)
                    await writer.drain()
            except (ConnectionError, OSError):
                pass
            finally:
                writer.transport.abort()

        try:
            await asyncio.gather(
                pipe(client_reader, upstream_writer, True),
                pipe(upstream_reader, client_writer, False),
            )
        finally:
            self._open.pop(key, None)
            self.writers -= {client_writer, upstream_writer}


class Relay:
    """TCP forwarding on an asyncio loop in a daemon thread of the test process."""

    def __init__(self):
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()
        self._servers: list[asyncio.base_events.Server] = []
        self._listeners: list[Listener] = []

    def listen(self, host: str, port: int, upstreams: list[tuple[str, int]]) -> Listener:
        """Accept on host:port (0: a free port, then `listener.port`) for these upstreams."""
        listener = Listener(upstreams)

        async def start():
            server = await asyncio.start_server(listener.serve, host, port, reuse_address=True)
            self._servers.append(server)
            return server.sockets[0].getsockname()[1]

        self._listeners.append(listener)
        listener.port = asyncio.run_coroutine_threadsafe(start(), self._loop).result(timeout=10)
        return listener

    def close(self) -> None:
        """Stop listening and cut every forwarded connection."""

        async def stop():
            for server in self._servers:
                server.close()
            for listener in self._listeners:
                for writer in list(listener.writers):
                    writer.transport.abort()
            # Cut, each connection's task ends on its own (a cancelled one is logged as an error).
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            if tasks:
                await asyncio.wait(tasks, timeout=5)

        asyncio.run_coroutine_threadsafe(stop(), self._loop).result(timeout=10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)
        self._loop.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
