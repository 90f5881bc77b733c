/**
 * The adversarial suite, continued: the network and processes (the rest is in
 * adversarial.test.ts). Hostile code in the real sandbox on the real Docker engine; every
 * case states the status it must get, and after every case the host must be as it was.
 * Nothing here is aimed at an address off this machine.
 */
import { createServer as createTcpServer, type AddressInfo } from "node:net";
import { createSocket } from "node:dgram";
import { describe, expect, it } from "vitest";
import { docker, hostileSuite, py, request, sh } from "./helpers.js";

// Two warm containers per image (python and node); after every case the host is as it was.
const suite = hostileSuite({ warmPoolSize: 2, outputLimitBytes: 256 * 1024 });

describe("network", () => {
  it("only loopback; DNS fails; the host's bridge address and a host port are unreachable", async () => {
    const hits: string[] = [];
    const tcp = createTcpServer((s) => {
      hits.push("tcp");
      s.destroy();
    });
    await new Promise<void>((resolve) => tcp.listen(0, "0.0.0.0", resolve));
    const udp = createSocket("udp4");
    udp.on("message", () => hits.push("udp"));
    await new Promise<void>((resolve) => udp.bind(0, "0.0.0.0", resolve));
    const tcpPort = (tcp.address() as AddressInfo).port;
    const udpPort = udp.address().port;
    const bridge = (await docker.getNetwork("bridge").inspect()) as { IPAM: { Config: { Gateway?: string }[] } };
    const gateway = bridge.IPAM.Config[0]?.Gateway ?? "172.17.0.1";
    try {
      const r = await suite.ex.run(
        py(
          [
            "import os, socket",
            "print('ifaces', ','.join(sorted(os.listdir('/sys/class/net'))))",
            "try:",
            "    socket.getaddrinfo('loopsmith-probe.example', 80)",
            "    print('DNS-RESOLVED')",
            "except socket.gaierror as e:",
            "    print('dns failed', e.errno)",
            `for host in ['${gateway}', '127.0.0.1']:`,
            "    s = socket.socket()",
            "    s.settimeout(2)",
            "    try:",
            `        s.connect((host, ${tcpPort}))`,
            "        print('CONNECTED', host)",
            "    except OSError as e:",
            "        print('refused', host, e.errno)",
            "u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)",
            "try:",
            `    u.sendto(b'x', ('${gateway}', ${udpPort}))`,
            "    print('SENT')",
            "except OSError as e:",
            "    print('udp refused', e.errno)",
          ].join("\n"),
        ),
      );
      expect(r.status).toBe("passed");
      expect(r.stdout).toContain("ifaces lo\n");
      expect(r.stdout).toContain("dns failed");
      expect(r.stdout).not.toMatch(/DNS-RESOLVED|CONNECTED|SENT/);
      await new Promise((resolve) => setTimeout(resolve, 200));
      expect(hits).toEqual([]);
    } finally {
      tcp.close();
      udp.close();
    }
  });
});

describe("processes", () => {
  it("background children left running after the command exits are killed", async () => {
    const r = await suite.ex.run(
      sh(
        "sleep 300 &\n(setsid sleep 301 &)\nnohup sh -c 'while true; do sleep 1; done' >/dev/null 2>&1 &\necho started\n",
      ),
    );
    expect(r.status).toBe("passed");
    expect(r.stdout).toContain("started");
    // afterEach: no sandbox process outside the warm containers.
  });

  it("orphaned children are reaped by the init process (no zombies)", async () => {
    const r = await suite.ex.run(
      py(
        [
          "import os, time",
          "for _ in range(5):",
          "    if os.fork() == 0:",
          "        if os.fork() == 0:",
          "            os._exit(0)",
          "        os._exit(0)",
          "time.sleep(1)",
          "zombies = []",
          "for p in os.listdir('/proc'):",
          "    if p.isdigit():",
          "        try:",
          "            st = open(f'/proc/{p}/stat').read()",
          "        except OSError:",
          "            continue",
          "        if st.rsplit(')', 1)[1].split()[0] == 'Z' and int(p) != os.getpid():",
          "            zombies.append(p)",
          "print('zombies', len(zombies))",
          "print('init', open('/proc/1/cmdline').read().split('\\0')[0])",
        ].join("\n"),
      ),
    );
    expect(r.status).toBe("passed");
    // The direct children are our own zombies until waited; their orphans are reaped by init.
    expect(r.stdout).toMatch(/zombies [0-5]\n/);
    expect(r.stdout).toContain("init /sbin/docker-init");
  });

  it("a segfault: killed, by SIGSEGV", async () => {
    const r = await suite.ex.run(py("import ctypes\nctypes.string_at(0)\n"));
    expect(r.status).toBe("killed");
    expect(r.exitCode).toBe(139);
    expect(r.reason).toContain("SIGSEGV");
  });

  it("ten runs in parallel each get their own result", async () => {
    const runs = Array.from({ length: 10 }, (_, i) =>
      suite.ex.run(
        request("python", [{ path: `test_n${i}.py`, content: `def test_n${i}():\n    assert ${i} == ${i}\n` }]),
      ),
    );
    const results = await Promise.all(runs);
    results.forEach((r, i) => {
      expect(r.status).toBe("passed");
      expect(r.tests.map((t) => t.name)).toEqual([`test_n${i}`]);
    });
  });

  it("cancel mid-run: killed, promptly", async () => {
    const controller = new AbortController();
    const started = Date.now();
    const pending = suite.ex.run(
      py("import time\nprint('running', flush=True)\ntime.sleep(60)\n", { timeoutMs: 60_000 }),
      {
        signal: controller.signal,
      },
    );
    setTimeout(() => controller.abort(), 1_000);
    const r = await pending;
    expect(r.status).toBe("killed");
    expect(r.reason).toContain("cancelled");
    expect(Date.now() - started).toBeLessThan(30_000);
  });
});
