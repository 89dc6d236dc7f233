#!/usr/bin/env python3
"""Runs a page of tilekit-web in a browser and prints what it reports.

Usage: serve.py DIR PAGE TIMEOUT_S BROWSER [ARG...]

Serves DIR on a free localhost port (WebGPU needs a secure context, and module scripts do not
load from file://), starts BROWSER ARG... URL, where URL is PAGE on that server, and waits for
the page to POST its report to /result: the page's WebGPU work finishes in the browser's GPU
process, so neither --dump-dom nor a virtual time budget sees its end reliably. Prints the
report, stops the browser, and exits 0 when the report's last line is `ok`, 1 otherwise (2 when
no report came within TIMEOUT_S seconds).
"""

import functools
import http.server
import subprocess
import sys
import time


class Handler(http.server.SimpleHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", 0))).decode("utf-8", "replace")
        self.send_response(204)
        self.end_headers()
        if self.path == "/result":
            self.server.report = body

    def log_message(self, *args):
        pass


def main():
    if len(sys.argv) < 5:
        sys.exit(__doc__)
    directory, page, timeout, browser = sys.argv[1], sys.argv[2], float(sys.argv[3]), sys.argv[4:]
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Handler, directory=directory))
    server.report = None
    server.timeout = 0.2
    url = f"http://127.0.0.1:{server.server_address[1]}/{page}"
    proc = subprocess.Popen(browser + [url], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + timeout
    try:
        while server.report is None and time.monotonic() < deadline:
            server.handle_request()
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
        server.server_close()
    if server.report is None:
        print(f"no report from {url} within {timeout:g} s")
        sys.exit(2)
    print(server.report)
    sys.exit(0 if server.report.rstrip().splitlines()[-1:] == ["ok"] else 1)


if __name__ == "__main__":
    main()
