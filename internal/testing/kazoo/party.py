"""Drives kazoo's Party and ShallowParty for corral's group
interoperability test: the Go side (package kazoo) starts it, sends it one
command a line on standard input and reads one answer a line on standard
output. Every answer is "ok" and what was asked, or "err" and a reason.
Values travel in hexadecimal ("-" for none), so that any bytes fit a line.

    join PATH IDENT           joins a Party at PATH with identifier IDENT
                              (text, hexadecimal here): "ok".
    shallow-join PATH IDENT   the same with a ShallowParty.
    party PATH                a Party's listing of PATH: "ok" and the
                              members' values, in kazoo's order, joined by
                              "," ("-" for none).
    shallow PATH              a ShallowParty's listing of PATH, the same way.
    leave PATH IDENT          the member that joined PATH with IDENT leaves.
    quit                      closes the client and exits.
"""
import sys

from kazoo.client import KazooClient
from kazoo.recipe.party import Party, ShallowParty


def unhex(s):
    return "" if s == "-" else bytes.fromhex(s).decode("utf-8")


def hexs(values):
    return ",".join(v.encode("utf-8").hex() or "-" for v in values) or "-"


def main():
    client = KazooClient(hosts=sys.argv[1], timeout=15)
    client.start(timeout=60)
    print("ok ready", flush=True)
    parties = {}
    for line in sys.stdin:
        f = line.split()
        try:
            if f[0] == "join" or f[0] == "shallow-join":
                kind = Party if f[0] == "join" else ShallowParty
                p = kind(client, f[1], unhex(f[2]))
                p.join()
                parties[(f[1], f[2])] = p
                answer = "ok joined"
            elif f[0] == "party":
                answer = "ok " + hexs(list(Party(client, f[1])))
            elif f[0] == "shallow":
                answer = "ok " + hexs(list(ShallowParty(client, f[1])))
            elif f[0] == "leave":
                parties.pop((f[1], f[2])).leave()
                answer = "ok left"
            elif f[0] == "quit":
                break
            else:
                answer = "err unknown command " + f[0]
        except Exception as e:  # the answer says what failed
            answer = "err " + repr(e).replace("\n", " ")
        print(answer, flush=True)
    for p in parties.values():
        p.leave()
    client.stop()
    client.close()
    print("ok bye", flush=True)


main()
