"""What operators deploy, checked for real:

- Debian's Prometheus scrapes a parity-server (mutual TLS, a training with a planted fault) with
  deploy/prometheus/prometheus.yml, and the per-verdict counters it stored agree with the
  result CSVs; the alert for the faulty op fires; every dashboard query runs.
- deploy/prometheus/rules.yml passes `promtool check rules` and its unit tests.
- Every query of deploy/grafana/parity-dashboard.json and of the alert rules names a metric the
  server exports (parity-server --list_metrics), and docs/metrics.md documents each of them.
- The systemd unit and the Kubernetes manifests only use flags parity-server knows.
"""
import collections
import json
import os
import re
import shutil
import subprocess
import sys
import time
import unittest
import urllib.parse
import urllib.request

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "e2e"))
import harness  # noqa: E402

DEPLOY = os.path.join(harness.ROOT, "deploy")
RULES = os.path.join(DEPLOY, "prometheus", "rules.yml")
SCRAPE = os.path.join(DEPLOY, "prometheus", "prometheus.yml")
DASHBOARD = os.path.join(DEPLOY, "grafana", "parity-dashboard.json")
HISTOGRAM_SUFFIXES = ("_bucket", "_sum", "_count")


def exported_metrics():
    out = subprocess.run([harness.SERVER, "--list_metrics"], check=True, capture_output=True,
                         text=True).stdout
    return {line.split("\t")[0]: line.split("\t")[1] for line in out.splitlines() if line}


def metric_names(expr):
    return set(re.findall(r"\bparity_[a-z0-9_]+", expr))


def dashboard_queries():
    with open(DASHBOARD, encoding="utf-8") as f:
        dash = json.load(f)
    queries = [t["expr"] for p in dash["panels"] for t in p.get("targets", [])]
    for var in dash["templating"]["list"]:
        q = var.get("query")
        if isinstance(q, dict):
            queries.append(q["query"])
    return queries


def rule_queries():
    with open(RULES, encoding="utf-8") as f:
        rules = yaml.safe_load(f)
    return [r["expr"] for g in rules["groups"] for r in g["rules"]]


def wait_for(what, predicate, timeout=90):
    """Polls predicate() until it returns a true value (returned) or the deadline passes."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = predicate()
        if last:
            return last
        time.sleep(0.25)
    raise AssertionError(f"timed out waiting for {what}; last: {last!r}")


class StaticChecksTest(unittest.TestCase):
    def test_rules_pass_promtool(self):
        for args in (["check", "rules", RULES], ["check", "config", SCRAPE],
                     ["test", "rules", os.path.join(HERE, "rules_test.yml")]):
            r = subprocess.run(["promtool", *args], capture_output=True, text=True, check=False,
                               cwd=HERE)
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)

    def test_every_query_names_an_exported_metric(self):
        exported = exported_metrics()
        queries = dashboard_queries() + rule_queries()
        self.assertGreater(len(queries), 10)
        used = set()
        for q in queries:
            names = metric_names(q)
            self.assertTrue(names or "up{" in q, f"query names no Parity metric: {q}")
            for name in names:
                base = name
                for suffix in HISTOGRAM_SUFFIXES:
                    if name.endswith(suffix) and name[:-len(suffix)] in exported:
                        self.assertEqual(exported[name[:-len(suffix)]], "histogram", name)
                        base = name[:-len(suffix)]
                self.assertIn(base, exported, f"{q!r} names {name}, which the server does not "
                              "export")
                used.add(base)
        # The dashboard shows every metric there is.
        self.assertEqual(set(exported) - used, set())

    def test_kubernetes_objects_fit_together(self):
        """The many-server manifest: a StatefulSet with a result volume per server, a headless
        Service for the agents, a PDB and an HPA on a metric the server exports, all selecting
        the same pods. (No cluster is available here: this checks the manifest, not a cluster.)"""
        with open(os.path.join(DEPLOY, "k8s", "parity-server.yaml"), encoding="utf-8") as f:
            docs = {(d["kind"], d["metadata"]["name"]): d for d in yaml.safe_load_all(f) if d}
        sts = docs[("StatefulSet", "parity-server")]
        labels = sts["spec"]["template"]["metadata"]["labels"]
        self.assertEqual(sts["spec"]["selector"]["matchLabels"], labels)
        headless = docs[("Service", sts["spec"]["serviceName"])]
        self.assertEqual(headless["spec"]["clusterIP"], "None")
        self.assertEqual(headless["spec"]["selector"], labels)
        self.assertEqual([p["port"] for p in headless["spec"]["ports"]], [59208])
        self.assertEqual([t["metadata"]["name"] for t in sts["spec"]["volumeClaimTemplates"]],
                         ["results"])
        mounts = sts["spec"]["template"]["spec"]["containers"][0]["volumeMounts"]
        self.assertIn("results", [m["name"] for m in mounts])
        pdb = docs[("PodDisruptionBudget", "parity-server")]
        self.assertEqual(pdb["spec"]["selector"]["matchLabels"], labels)
        hpa = docs[("HorizontalPodAutoscaler", "parity-server")]
        self.assertEqual(hpa["spec"]["scaleTargetRef"]["kind"], "StatefulSet")
        self.assertEqual(hpa["spec"]["scaleTargetRef"]["name"], "parity-server")
        exported = exported_metrics()
        for m in hpa["spec"]["metrics"]:
            self.assertIn(m["pods"]["metric"]["name"], exported)

    def test_every_alert_is_documented(self):
        with open(RULES, encoding="utf-8") as f:
            alerts = {r["alert"] for g in yaml.safe_load(f)["groups"] for r in g["rules"]}
        with open(os.path.join(harness.ROOT, "docs", "metrics.md"), encoding="utf-8") as f:
            documented = set(re.findall(r"^\| `(Parity[A-Za-z]+)` \|", f.read(), re.M))
        self.assertEqual(alerts, documented)

    def test_every_family_is_exported_at_start_up(self):
        # Before any agent: every family the server lists, but the two labelled by rank (born at
        # a rank's Hello), has a series, so dashboards and alerts see a first event as an
        # increase (issue 66: stream errors were absent until the first one, and a series born
        # at 1 is no increase).
        work = harness.tempdir("parity_families_")
        server = harness.Server(work, None)
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{server.metrics_port}/metrics",
                                        timeout=10) as r:
                text = r.read().decode()
        finally:
            server.stop()
        seen = set()
        for line in text.splitlines():
            if line and not line.startswith("#"):
                name = re.match(r"[a-z_0-9]+", line).group(0)
                for suffix in HISTOGRAM_SUFFIXES:
                    if name.endswith(suffix):
                        name = name[:-len(suffix)]
                seen.add(name)
        missing = set(exported_metrics()) - seen
        self.assertEqual(missing, {"parity_server_rank_checked_total",
                                   "parity_server_rank_errors_total"})
        self.assertIn('parity_server_stream_errors_total{code="UNAUTHENTICATED"} 0', text)

    def test_every_metric_is_documented(self):
        with open(os.path.join(harness.ROOT, "docs", "metrics.md"), encoding="utf-8") as f:
            doc = f.read()
        for name in exported_metrics():
            self.assertIn(f"`{name}`", doc)

    def test_service_files_use_real_flags_and_valid_configs(self):
        help_text = subprocess.run([harness.SERVER, "--help"], capture_output=True, text=True,
                                   check=False).stdout
        known = set(re.findall(r"^  --(\w+)", help_text, re.M))
        self.assertIn("tls_path", known)
        args = []
        with open(os.path.join(DEPLOY, "systemd", "parity-server.service"),
                  encoding="utf-8") as f:
            unit = f.read()
        args += re.search(r"^ExecStart=(.*)$", unit, re.M).group(1).split()[1:]
        configs = {"deploy/server.json": os.path.join(DEPLOY, "server.json")}
        work = harness.tempdir("parity_deploy_")
        with open(os.path.join(DEPLOY, "k8s", "parity-server.yaml"), encoding="utf-8") as f:
            for doc in yaml.safe_load_all(f):
                if doc and doc["kind"] == "StatefulSet":
                    for c in doc["spec"]["template"]["spec"]["containers"]:
                        args += c.get("args", [])
                if doc and doc["kind"] == "ConfigMap":
                    path = os.path.join(work, "k8s-server.json")
                    with open(path, "w", encoding="utf-8") as out:
                        out.write(doc["data"]["server.json"])
                    configs["the k8s ConfigMap"] = path
        flags = {a[2:].split("=")[0] for a in args if a.startswith("--")}
        self.assertIn("config", flags)
        self.assertEqual(flags - known, set())
        # Each shipped server configuration is accepted by the server, with real certificates
        # where the deployment mounts them.
        server_tls, _ = harness.make_certs(os.path.join(work, "certs"))
        for what, path in configs.items():
            r = subprocess.run([harness.SERVER, f"--config={path}", f"--tls_path={server_tls}",
                                f"--output_dir={work}", "--check_config"],
                               capture_output=True, text=True, check=False)
            self.assertEqual(r.returncode, 0, f"{what}: {r.stdout}{r.stderr}")
            self.assertIn("configuration OK", r.stdout)
        # And a broken one is refused with the key named.
        bad = os.path.join(work, "bad.json")
        with open(bad, "w", encoding="utf-8") as f:
            f.write('{"task": "run_ut", "run_ut": {"port": 70000}}')
        r = subprocess.run([harness.SERVER, f"--config={bad}", "--check_config", "--plaintext"],
                           capture_output=True, text=True, check=False)
        self.assertEqual(r.returncode, 2)
        self.assertIn("run_ut.port", r.stderr)


DOCKERFILE = os.path.join(DEPLOY, "container", "Dockerfile")
BASE_LIBRARIES = {"libc6", "libgcc-s1", "libstdc++6"}  # in debian:bookworm-slim itself


def dockerfile_stages():
    """[(FROM line, [instructions with their continuation lines joined])] of the Dockerfile."""
    with open(DOCKERFILE, encoding="utf-8") as f:
        text = re.sub(r"\\\n", " ", f.read())
    stages = []
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("FROM "):
            stages.append((line, []))
        else:
            stages[-1][1].append(line)
    return stages


def apt_packages(instructions):
    packages = []
    for ins in instructions:
        m = re.search(r"apt-get install -y --no-install-recommends (.*?)(&&|$)", ins)
        if m:
            packages += m.group(1).split()
    return packages


class ContainerImageTest(unittest.TestCase):
    """deploy/container/Dockerfile, step by step where no image can be built (no daemon, no
    registry here): its build stage's packages are the ones this machine builds with, its targets
    exist, what it copies is what the build makes, its runtime packages hold every library the
    binaries are linked against, and its entrypoint, user and ports are what the Kubernetes
    manifest relies on (issue 66)."""

    @classmethod
    def setUpClass(cls):
        cls.stages = dockerfile_stages()
        cls.build_stage, cls.runtime = cls.stages[0][1], cls.stages[-1][1]

    def test_two_stages_on_bookworm(self):
        self.assertEqual([f for f, _ in self.stages],
                         ["FROM debian:bookworm AS build", "FROM debian:bookworm-slim"])

    def test_the_build_stage_builds_with_this_machines_packages_and_targets(self):
        deps = subprocess.run([os.path.join(DEPLOY, "install-deps.sh"), "--print"],
                              capture_output=True, text=True, check=True).stdout.split()
        self.assertEqual(set(apt_packages(self.build_stage)) - set(deps) - {"git"}, set())
        targets = subprocess.run(["cmake", "--build", harness.BUILD, "--target", "help"],
                                 capture_output=True, text=True, check=True).stdout
        build = [i for i in self.build_stage if "cmake --build" in i][0]
        wanted = re.search(r"--target (.*)", build).group(1).split()
        self.assertEqual(len(wanted), 3)
        for target in wanted:
            self.assertRegex(targets, rf"(?m)^(\.\.\. )?{re.escape(target)}(:|$| )")
        self.assertIn("-DPARITY_BUILD_TESTS=OFF", " ".join(self.build_stage))

    def test_what_the_image_copies_is_what_the_build_makes(self):
        copies = [i.split()[2:-1] for i in self.runtime if i.startswith("COPY --from=build")]
        self.assertTrue(copies)
        for sources in copies:
            for source in sources:
                self.assertTrue(source.startswith("/build/"), source)
                self.assertTrue(os.path.exists(os.path.join(harness.BUILD, source[7:])), source)

    def test_the_runtime_packages_hold_every_linked_library(self):
        runtime = set(apt_packages(self.runtime))
        needed = set()
        for binary in ("parity-server", "parity-repro", "libparity_npu_reference.so"):
            path = os.path.join(harness.BUILD, "server", binary)  # build outputs
            names = re.findall(r"\(NEEDED\).*\[(.*)\]",
                               subprocess.run(["readelf", "-d", path], capture_output=True,
                                              text=True, check=True).stdout)
            resolved = dict(re.findall(r"^\s*(\S+) => (\S+)",
                                       subprocess.run(["ldd", path], capture_output=True,
                                                      text=True, check=True).stdout, re.M))
            for name in names:
                if name not in resolved:  # the dynamic loader itself (libc6's)
                    self.assertTrue(name.startswith("ld-linux"), name)
                    continue
                real = os.path.realpath(resolved[name])
                # Debian's merged /usr: dpkg knows a library by either of its paths.
                for candidate in (real, re.sub(r"^/usr/lib/", "/lib/", real)):
                    owner = subprocess.run(["dpkg", "-S", candidate], capture_output=True,
                                           text=True, check=False)
                    if owner.returncode == 0:
                        break
                self.assertEqual(owner.returncode, 0, f"no package holds {real}")
                needed.add(owner.stdout.split(":")[0])
        self.assertEqual(needed - runtime - BASE_LIBRARIES, set(), "linked, not installed")
        self.assertEqual(runtime - needed, set(), "installed, not linked")

    def test_the_manifest_runs_the_images_entrypoint_as_its_user_on_its_ports(self):
        entry = [i for i in self.runtime if i.startswith("ENTRYPOINT")][0]
        self.assertEqual(json.loads(entry[len("ENTRYPOINT"):]), ["/usr/local/bin/parity-server"])
        self.assertTrue(any(i.startswith("COPY --from=build /build/server/parity-server")
                            and i.endswith(" /usr/local/bin/") for i in self.runtime))
        user = [i.split()[1] for i in self.runtime if i.startswith("USER")][0]
        exposed = {int(p) for i in self.runtime if i.startswith("EXPOSE") for p in i.split()[1:]}
        with open(os.path.join(DEPLOY, "k8s", "parity-server.yaml"), encoding="utf-8") as f:
            sts = [d for d in yaml.safe_load_all(f) if d and d["kind"] == "StatefulSet"][0]
        pod = sts["spec"]["template"]["spec"]
        container = pod["containers"][0]
        self.assertNotIn("command", container)  # the entrypoint is the server
        self.assertEqual(str(pod["securityContext"]["runAsUser"]), user)
        self.assertEqual({p["containerPort"] for p in container["ports"]}, exposed)
        with open(os.path.join(harness.ROOT, "docs", "deploy.md"), encoding="utf-8") as f:
            docs = f.read()
        build = re.search(r"docker build -f deploy/container/Dockerfile -t (\S+) \.", docs)
        self.assertIsNotNone(build, "docs/deploy.md says how to build the image")
        self.assertEqual(container["image"], build.group(1))


class CertificatesTest(unittest.TestCase):
    @unittest.skipUnless(os.geteuid() == 0 and shutil.which("runuser"),
                         "needs root to hand the files to an unprivileged user")
    def test_installed_certificates_are_readable_by_the_service_user(self):
        # docs/deploy.md's systemd steps as an operator runs them, with `nobody` for the service
        # user: copied with cp, the files stay root's and the server's check fails naming one;
        # installed with deploy/install-certs.sh, the same check as that user passes (issue 66).
        work = harness.tempdir("parity_certs_")
        os.chmod(work, 0o755)
        server_tls, _ = harness.make_certs(os.path.join(work, "made"))
        output = os.path.join(work, "results")
        os.makedirs(output)
        os.chmod(output, 0o777)

        def check_as_nobody(tls_path):
            return subprocess.run(["runuser", "-u", "nobody", "--", harness.SERVER,
                                   f"--config={os.path.join(DEPLOY, 'server.json')}",
                                   f"--tls_path={tls_path}", f"--output_dir={output}",
                                   "--check_config"],
                                  capture_output=True, text=True, check=False, timeout=60)

        copied = os.path.join(work, "copied")
        os.makedirs(copied)
        for f in os.listdir(server_tls):
            shutil.copy(os.path.join(server_tls, f), copied)
            os.chmod(os.path.join(copied, f), 0o600)  # as gen-certs.sh writes them
        r = check_as_nobody(copied)
        self.assertEqual(r.returncode, 2, r.stdout + r.stderr)
        self.assertIn(f"PERMISSION_DENIED: {copied}/server.", r.stdout + r.stderr)
        installed = os.path.join(work, "tls")
        r = subprocess.run([os.path.join(DEPLOY, "install-certs.sh"), server_tls, installed,
                            "nobody"], capture_output=True, text=True, check=False)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertEqual(os.stat(os.path.join(installed, "server.key")).st_mode & 0o777, 0o600)
        r = check_as_nobody(installed)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("configuration OK", r.stdout)


class PrometheusTest(unittest.TestCase):
    @unittest.skipUnless(shutil.which("prometheus"), "Debian's prometheus is not installed")
    def test_scraped_counters_agree_with_the_result_csvs(self):
        work = harness.tempdir("parity_prom_")
        server_tls, client_tls = harness.make_certs(os.path.join(work, "certs"))
        server = harness.Server(work, server_tls)
        prom = None
        try:
            prom_port = harness.free_port()
            with open(SCRAPE, encoding="utf-8") as f:
                config = yaml.safe_load(f)
            # The shipped config, pointed at this server and made fast for a test.
            config["global"].update(scrape_interval="1s", evaluation_interval="1s")
            config["rule_files"] = [RULES]
            job = config["scrape_configs"][0]
            job["scrape_interval"] = "1s"
            job["static_configs"][0]["targets"] = [f"127.0.0.1:{server.metrics_port}"]
            prom_config = os.path.join(work, "prometheus.yml")
            with open(prom_config, "w", encoding="utf-8") as f:
                yaml.safe_dump(config, f)
            prom_log = open(os.path.join(work, "prometheus.log"), "w", encoding="utf-8")  # noqa: SIM115
            self.addCleanup(prom_log.close)
            prom = subprocess.Popen(
                ["prometheus", f"--config.file={prom_config}",
                 f"--storage.tsdb.path={os.path.join(work, 'tsdb')}",
                 f"--web.listen-address=127.0.0.1:{prom_port}", "--log.level=warn"],
                stdout=prom_log, stderr=subprocess.STDOUT)
            api = f"http://127.0.0.1:{prom_port}"

            def query(expr):
                url = f"{api}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
                with urllib.request.urlopen(url, timeout=10) as r:
                    body = json.load(r)
                self.assertEqual(body["status"], "success", expr)
                return body["data"]["result"]

            def ready():
                try:
                    with urllib.request.urlopen(f"{api}/-/ready", timeout=2) as r:
                        return r.status == 200
                except OSError:
                    return prom.poll() is not None and self.fail("prometheus exited")
            wait_for("prometheus to start", ready)
            wait_for("the first scrape", lambda: query('up{job="parity"} == 1'))

            config_path = harness.agent_config(os.path.join(work, "config.json"), server.port,
                                               client_tls, policy="block")
            r = harness.run([harness.PYTHON, harness.TRAIN, "--config", config_path, "--steps",
                             "3", "--fault", "gelu_tanh"])
            self.assertEqual(r.returncode, 0, r.stderr)

            # What the result files say, by (phase, verdict): one JSON line per call (a result
            # CSV row is one API, its backward calls aggregated).
            expected = collections.Counter()
            for record in server.records():
                expected[(record["phase"], record["status"].lower())] += 1
            self.assertGreater(expected[("forward", "error")], 0)

            def scraped():
                got = collections.Counter()
                for s in query("parity_server_calls_checked_total"):
                    v = int(float(s["value"][1]))
                    if v:
                        got[(s["metric"]["phase"], s["metric"]["verdict"])] += v
                return got
            wait_for("Prometheus to scrape every verdict",
                     lambda: sum(scraped().values()) == sum(expected.values()))
            self.assertEqual(scraped(), expected)
            errors = {s["metric"]["op"]: float(s["value"][1])
                      for s in query("parity_server_op_errors_total")}
            # op="other" exists from start-up at zero (the family with it).
            self.assertEqual(errors, {"aten::gelu": expected[("forward", "error")], "other": 0})

            # The shipped alert fires for the faulty op, and only for it.
            firing = wait_for("ParityPrecisionErrors to fire", lambda: query(
                'ALERTS{alertname="ParityPrecisionErrors",alertstate="firing"}'))
            self.assertEqual({a["metric"]["op"] for a in firing}, {"aten::gelu"})

            # Every dashboard query is valid PromQL and returns data from this server.
            for q in dashboard_queries():
                expr = (q.replace("$instance", ".*").replace("$__range", "1h")
                        .replace("$__rate_interval", "1m"))
                if "label_values" in expr:
                    continue
                query(expr)
        finally:
            server.stop()
            if prom is not None:
                prom.terminate()
                prom.wait(timeout=30)


if __name__ == "__main__":
    unittest.main(verbosity=2)
