"""Schemathesis hooks for delayq's API fuzzing (run.sh): a request the server rejects (4xx)
must change nothing in Redis, and no request gets a 5xx but the one the fuzzed deployment
makes right (below).

Before each call the whole Redis data set is digested (every key's DUMP, in one script call);
after a 4xx answer it is digested again and must be the same; a failure names the keys that
changed (and the registry of queues as it is then). Claim records are left out:
they expire by themselves with their lease, whatever the request did; so is the registry of
processes (`dq:processes`), which the server renews every 10 s on its own (README,
"Upgrading"), and so are the webhooks' leases and places (`dq:webhooks:lease:<queue>`,
`dq:webhooks:cursors`), which the server's webhook runtime takes and moves on its own, and
the audit log (`dq:audit`), where a refused attempt at an admin action is recorded on
purpose (docs/operations.md, "Many teams on one delayq").
"""

import json
import os
import subprocess

import schemathesis

SOCKET = os.environ["DELAYQ_FUZZ_REDIS_SOCKET"]

DIGEST = """
local keys = redis.call('KEYS', '*')
table.sort(keys)
local parts = {}
for _, key in ipairs(keys) do
  if not string.find(key, ':claim:', 1, true) and key ~= 'dq:processes' and key ~= 'dq:audit'
      and not string.find(key, 'dq:webhooks:lease:', 1, true) and key ~= 'dq:webhooks:cursors' then
    parts[#parts + 1] = key .. '=' .. redis.sha1hex(redis.call('DUMP', key))
  end
end
return table.concat(parts, '\\n')
"""

_before = {}


def digest():
    out = subprocess.run(
        ["redis-cli", "-s", SOCKET, "EVAL", DIGEST, "0"],
        check=True,
        capture_output=True,
        text=True,
        timeout=10,
    )
    return out.stdout.strip()


@schemathesis.hook
def before_call(ctx, case, kwargs):
    _before[id(case)] = digest()


@schemathesis.check
def rejected_request_changes_nothing(ctx, response, case):
    before = _before.pop(id(case), None)
    if before is None or not 400 <= response.status_code < 500:
        return None
    after = digest()
    if after != before:
        changed = sorted(set(before.splitlines()) ^ set(after.splitlines()))
        keys = sorted({line.rsplit("=", 1)[0] for line in changed})
        members = subprocess.run(
            ["redis-cli", "-s", SOCKET, "SMEMBERS", "dq:queues"],
            capture_output=True, text=True, timeout=10,
        ).stdout.split()
        raise AssertionError(
            f"{case.method} {case.formatted_path} was rejected with "
            f"{response.status_code} but changed Redis: {', '.join(keys[:8])} "
            f"(queues now: {' '.join(members[:20])})"
        )
    return None


@schemathesis.check
def no_server_error(ctx, response, case):
    """Any 5xx fails, except 503 `not_replicated`: the fuzzed server's Redis has no replicas,
    so a send that asks for one is written and answered so, as documented."""
    if response.status_code < 500:
        return None
    if response.status_code == 503:
        try:
            code = json.loads(response.text)["error"]["code"]
        except (ValueError, KeyError, TypeError):
            code = None
        if code == "not_replicated":
            return None
    raise AssertionError(
        f"{case.method} {case.formatted_path} got a server error {response.status_code}: "
        f"{response.text[:200]}"
    )
