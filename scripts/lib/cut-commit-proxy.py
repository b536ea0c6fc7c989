"""A TCP proxy in front of PostgreSQL that cuts a connection at the worst moment: right after a client's COMMIT
has gone to the server, before the server's answer comes back (the server commits; the client never learns it).
For CommitCutEndToEndTests.

    python3 cut-commit-proxy.py TARGET_PORT CUTS STATUS_FILE

Listens on a free loopback port and prints it on its first line. Cuts the first CUTS connections that send a
COMMIT (every COMMIT after that passes), and writes the number cut so far to STATUS_FILE.
"""
import asyncio
import struct
import sys

target_port, cuts_wanted, status_file = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
cut = 0


def record():
    with open(status_file, "w") as f:
        f.write(f"{cut}\n")


async def pipe_server_to_client(server, client, state):
    try:
        while data := await server.read(65536):
            if state["cutting"]:
                return  # the answer to the COMMIT, and everything after it, never reaches the client
            client.write(data)
            await client.drain()
    except (ConnectionError, asyncio.IncompleteReadError):
        pass
    finally:
        client.close()


async def handle(client_reader, client_writer):
    global cut
    server_reader, server_writer = await asyncio.open_connection("127.0.0.1", target_port)
    state = {"cutting": False}
    back = asyncio.create_task(pipe_server_to_client(server_reader, client_writer, state))
    buffer = b""
    started = False  # past the untyped startup messages (SSLRequest, StartupMessage)
    try:
        while data := await client_reader.read(65536):
            buffer += data
            out = b""
            while True:
                if not started:
                    if len(buffer) < 8:
                        break
                    length = struct.unpack("!I", buffer[:4])[0]
                    if len(buffer) < length:
                        break
                    code = struct.unpack("!I", buffer[4:8])[0]
                    out += buffer[:length]
                    buffer = buffer[length:]
                    if code == 80877103:  # SSLRequest: the server answers one byte, then the startup comes
                        continue
                    started = True
                    continue
                if len(buffer) < 5:
                    break
                length = struct.unpack("!I", buffer[1:5])[0]
                if len(buffer) < 1 + length:
                    break
                message = buffer[: 1 + length]
                buffer = buffer[1 + length :]
                out += message
                if message[:1] in (b"Q", b"P") and b"COMMIT" in message.upper() and cut < cuts_wanted:
                    state["cutting"] = True
            if state["cutting"]:
                server_writer.write(out)  # the COMMIT reaches the server...
                await server_writer.drain()
                cut += 1
                record()
                await asyncio.sleep(0.3)  # ...which commits it; the client is cut before any answer
                client_writer.close()
                server_writer.close()
                back.cancel()
                return
            server_writer.write(out)
            await server_writer.drain()
    except (ConnectionError, asyncio.IncompleteReadError):
        pass
    finally:
        server_writer.close()
        client_writer.close()


async def main():
    record()
    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    print(server.sockets[0].getsockname()[1], flush=True)
    async with server:
        await server.serve_forever()


asyncio.run(main())
