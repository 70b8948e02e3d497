"""The README's TLS set-up for a team, tried for real: a throwaway PostgreSQL 15 server of
this test's own (initdb into a temporary folder, a free port; the shared test server is
never reconfigured) gets `postgresql.conf` and `pg_hba.conf` lines read out of the README,
so that the how-to cannot drift from what works, and certificates made with openssl. Then
each kind of login the README speaks of is tried: a client certificate, a password over
TLS, a connection without TLS, one over IPv6."""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psycopg
import pytest

README = Path(__file__).resolve().parent.parent / "README.md"
POSTGRES_BIN = Path("/usr/lib/postgresql/15/bin")
PASSWORD = "a test password: only its verifier reaches the server"
# The lines of a stock pg_hba.conf that the README's lines go before.
STOCK_HBA = ("host all all 127.0.0.1/32 scram-sha-256\n"
             "host all all ::1/128 scram-sha-256\n")

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not (POSTGRES_BIN / "initdb").exists() or not shutil.which("openssl"),
                       reason="needs PostgreSQL 15's initdb and pg_ctl, and openssl"),
]


def team_section() -> str:
    """The README's team how-to, from its heading to the next one."""
    readme = README.read_text(encoding="utf-8")
    section = re.search(r"### A team on PostgreSQL\n(.*?)\n### ", readme, re.S)
    assert section, "the README's team section is missing"
    return section.group(1)


def readme_config(file: str) -> str:
    """The code block the README's TLS how-to gives for `file` (postgresql.conf or
    pg_hba.conf)."""
    block = re.search(r"connect over TLS.*?`" + re.escape(file) + r"`[^`]*```\n(.*?)```",
                      team_section(), re.S)
    assert block, f"the README's TLS how-to gives no block for {file}"
    return block.group(1)


def as_server_user(command: list[str]) -> list[str]:
    """`command` run as the user postgres when this test runs as root (initdb and the
    server refuse root), else as this user."""
    return ["runuser", "-u", "postgres", "--", *command] if os.geteuid() == 0 else command


def openssl(folder: Path, *arguments: str) -> None:
    subprocess.run(["openssl", *arguments], cwd=folder, check=True, capture_output=True)


def make_certificates(folder: Path) -> None:
    """An authority (root.crt), the server's certificate for `localhost` signed by it
    (server.crt, server.key) and carol's client certificate (carol.crt, carol.key)."""
    key = ("-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes")
    openssl(folder, "req", "-x509", *key, "-keyout", "root.key", "-out", "root.crt",
            "-days", "1", "-subj", "/CN=thumb test authority",
            "-addext", "basicConstraints=critical,CA:TRUE",
            "-addext", "keyUsage=critical,keyCertSign,cRLSign")
    for name, extension in (("server", "subjectAltName=DNS:localhost"),
                            ("carol", "extendedKeyUsage=clientAuth")):
        (folder / f"{name}.ext").write_text(extension + "\n")
        openssl(folder, "req", *key, "-keyout", f"{name}.key", "-out", f"{name}.csr",
                "-subj", f"/CN={'localhost' if name == 'server' else name}")
        openssl(folder, "x509", "-req", "-in", f"{name}.csr", "-CA", "root.crt",
                "-CAkey", "root.key", "-CAcreateserial", "-days", "1",
                "-extfile", f"{name}.ext", "-out", f"{name}.crt")
        (folder / f"{name}.key").chmod(0o600)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@dataclass(frozen=True)
class Server:
    """The throwaway server: its port, and the folder of the certificates."""

    port: int
    certificates: Path

    def connect(self, user: str, *, hostaddr: str = "127.0.0.1", sslmode: str = "verify-full",
                password: str | None = None, certificate: bool = False) -> psycopg.Connection:
        """A login as `user` to the database thumb at `hostaddr`, checking the server's
        certificate against the authority's (with verify-full, its name too)."""
        client = (dict(sslcert=str(self.certificates / f"{user}.crt"),
                       sslkey=str(self.certificates / f"{user}.key")) if certificate
                  else dict(sslcert=str(self.certificates / "none.crt")))
        return psycopg.connect(host="localhost", hostaddr=hostaddr, port=self.port,
                               dbname="thumb", user=user, password=password,
                               sslmode=sslmode,
                               sslrootcert=str(self.certificates / "root.crt"),
                               connect_timeout=10, **client)


@pytest.fixture(scope="module")
def server() -> Iterator[Server]:
    """A PostgreSQL 15 server configured as the README says (plus its port, IPv4 and IPv6
    loopback addresses, and a socket in its own folder, through which the set-up connects
    as postgres), with the roles the README's lines name; stopped and removed after."""
    folder = Path(tempfile.mkdtemp(prefix="thumb-tls-"))
    data, certificates = folder / "data", folder / "certificates"
    pg_ctl = [str(POSTGRES_BIN / "pg_ctl"), "-D", str(data), "-l", str(folder / "log"), "-w"]
    try:
        certificates.mkdir()
        make_certificates(certificates)
        port = configured_cluster(folder, data, certificates)
        started = subprocess.run(as_server_user([*pg_ctl, "start"]), capture_output=True)
        assert started.returncode == 0, (folder / "log").read_text()
        with psycopg.connect(host=str(folder), port=port, user="postgres", dbname="postgres",
                             autocommit=True) as setup:
            for statement in (
                    "CREATE ROLE thumb_annotator", "CREATE ROLE thumb_lead",
                    f"CREATE ROLE thumb_admin LOGIN PASSWORD '{PASSWORD}'",
                    f"CREATE ROLE alice LOGIN PASSWORD '{PASSWORD}' IN ROLE thumb_annotator",
                    "CREATE ROLE carol LOGIN IN ROLE thumb_annotator",  # `team add --cert`
                    "CREATE DATABASE thumb OWNER thumb_admin"):
                setup.execute(statement)
        yield Server(port, certificates)
    finally:
        if (data / "postmaster.pid").exists():
            subprocess.run(as_server_user([*pg_ctl, "-m", "immediate", "stop"]),
                           capture_output=True)
        shutil.rmtree(folder, ignore_errors=True)


def configured_cluster(folder: Path, data: Path, certificates: Path) -> int:
    """initdb into `data`, then the README's postgresql.conf lines (and this server's port,
    loopback addresses and socket folder after them) and its pg_hba.conf lines (before a
    stock file's, and the socket's line for the set-up); the port chosen."""
    if os.geteuid() == 0:
        shutil.chown(folder, "postgres")
    subprocess.run(as_server_user([str(POSTGRES_BIN / "initdb"), "-D", str(data),
                                   "-U", "postgres", "--no-sync"]),
                   check=True, capture_output=True)
    for name in ("server.crt", "server.key", "root.crt"):
        shutil.copy(certificates / name, data / name)
        if os.geteuid() == 0:
            shutil.chown(data / name, "postgres")
    (data / "server.key").chmod(0o600)
    port = free_port()
    with (data / "postgresql.conf").open("a") as conf:
        conf.write(readme_config("postgresql.conf"))
        conf.write(f"port = {port}\nlisten_addresses = '127.0.0.1,::1'\n"
                   f"unix_socket_directories = '{folder}'\n")
    (data / "pg_hba.conf").write_text(readme_config("pg_hba.conf") + STOCK_HBA
                                      + "local all postgres trust\n")
    return port


def who_over_tls(connection: psycopg.Connection) -> tuple[str, bool]:
    with connection:
        return connection.execute(
            "SELECT current_user, ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()").fetchone()


def test_a_person_added_with_cert_logs_in_with_the_client_certificate(server):
    """`ssl_ca_file` makes the server ask for and check the certificate; the `cert` line
    comes before the group's password line, so carol's certificate is what counts."""
    assert who_over_tls(server.connect("carol", certificate=True)) == ("carol", True)
    with pytest.raises(psycopg.OperationalError, match="certificate"):
        server.connect("carol", password=PASSWORD)


def test_the_team_and_the_administrator_log_in_with_a_password_over_tls(server):
    assert who_over_tls(server.connect("alice", password=PASSWORD)) == ("alice", True)
    assert who_over_tls(server.connect("thumb_admin", password=PASSWORD)) == ("thumb_admin",
                                                                                 True)
    with pytest.raises(psycopg.OperationalError, match="password authentication failed"):
        server.connect("alice", password="a guess")


def test_a_connection_without_tls_is_refused(server):
    with pytest.raises(psycopg.OperationalError, match=r"rejects connection.*no encryption"):
        server.connect("alice", sslmode="disable", password=PASSWORD)


def test_a_connection_over_ipv6_is_refused(server):
    """Even over TLS with the right password: the README's addresses are IPv4, and its
    last line closes IPv6 before the stock lines (`::1/128 scram-sha-256`) could open it."""
    with pytest.raises(psycopg.OperationalError, match='rejects connection for host "::1"'):
        server.connect("alice", hostaddr="::1", password=PASSWORD)


def test_no_password_is_typed_on_a_command_line():
    """The administrator's role is made with a prompt (createuser --pwprompt sends only
    the SCRAM verifier), and no command of the how-to carries a password: a command
    line is seen by every user of the machine (ps) and kept in the shell's history."""
    blocks = re.findall(r"```sh\n(.*?)```", team_section(), re.S)
    commands = [line for block in blocks for line in block.splitlines()
                if line and not line.startswith("#")]
    assert any(re.fullmatch(r"sudo -u postgres createuser .*--pwprompt.* thumb_admin", line)
               for line in commands), commands
    for line in commands:
        assert not re.search(r"PASSWORD\s*'|PGPASSWORD|password=|://[^@/]*:[^@/]*@", line,
                             re.I), line
