"""A loopback port free at the moment of asking, below the kernel's ephemeral range, as the Swift tests'
freePortBelowEphemeralRange: a port the kernel picks for port 0 is one an outgoing connection (a Kafka client's,
say) may take as its local port before the server that was given it binds it. Drawn at random from thousands and
checked free: only another caller of this could pick the same one.

Imported by the Python test harnesses; run as a script (scripts/lib/services.sh), it prints one."""
import random
import socket


def free_port():
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as ports:
            low = int(ports.read().split()[0])
    except (OSError, ValueError, IndexError):
        low = 32768
    for _ in range(100):
        port = random.randrange(10000, max(10001, low))
        with socket.socket() as probe:
            try:
                probe.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise AssertionError(f"no free loopback port below {low}")


if __name__ == "__main__":
    print(free_port())
