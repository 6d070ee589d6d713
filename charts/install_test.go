//go:build k8s

// The chart installed into a real Kubernetes control plane (build tag k8s;
// scripts/test.sh runs it after scripts/k8s.sh has built etcd, kube-apiserver,
// kube-controller-manager, kubectl and helm into .run/k8s/bin). For every values
// set (defaults, the cost override, each ci/*.yaml, values-eks.yaml) the chart is
// rendered with `helm template` and applied with kubectl into its own namespace
// labelled for the `restricted` Pod Security level: first
// `--dry-run=server --validate=strict`, then for real. No object may be refused
// and the API server may give no warning; then the controller-manager must
// create every Deployment's pods and the migration Job's pod (they stay
// Pending: the control plane has no nodes).
package charts

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"
)

const kubeVersionFlag = "1.33.13"

// controlPlane is etcd, kube-apiserver and kube-controller-manager on loopback.
type controlPlane struct {
	bin        string
	dir        string
	kubeconfig string
	procs      []*exec.Cmd
}

func k8sBinDir(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("THREATVIEW_K8S_BIN")
	if dir == "" {
		dir = filepath.Join("..", ".run", "k8s", "bin")
	}
	for _, b := range []string{"etcd", "kube-apiserver", "kube-controller-manager", "kubectl", "helm"} {
		if _, err := os.Stat(filepath.Join(dir, b)); err != nil {
			t.Fatalf("%s: %v (build them with scripts/k8s.sh build)", b, err)
		}
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		t.Fatal(err)
	}
	return abs
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func writePEM(t *testing.T, path, typ string, der []byte) {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}

// certs writes a self-signed serving certificate for 127.0.0.1 and a
// service-account key pair into dir.
func certs(t *testing.T, dir string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "kube-apiserver"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses:           []net.IP{net.ParseIP("127.0.0.1")},
		DNSNames:              []string{"localhost"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	writePEM(t, filepath.Join(dir, "apiserver.crt"), "CERTIFICATE", der)
	kd, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	writePEM(t, filepath.Join(dir, "apiserver.key"), "EC PRIVATE KEY", kd)
	sa, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	writePEM(t, filepath.Join(dir, "sa.key"), "RSA PRIVATE KEY", x509.MarshalPKCS1PrivateKey(sa))
	pub, err := x509.MarshalPKIXPublicKey(&sa.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	writePEM(t, filepath.Join(dir, "sa.pub"), "PUBLIC KEY", pub)
}

func (cp *controlPlane) start(t *testing.T, name string, args ...string) {
	t.Helper()
	logf, err := os.Create(filepath.Join(cp.dir, name+".log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(filepath.Join(cp.bin, name), args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	cp.procs = append(cp.procs, cmd)
}

func (cp *controlPlane) stop() {
	for i := len(cp.procs) - 1; i >= 0; i-- {
		p := cp.procs[i]
		_ = p.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { _ = p.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = p.Process.Kill()
			<-done
		}
	}
}

func (cp *controlPlane) logTail(name string) string {
	b, _ := os.ReadFile(filepath.Join(cp.dir, name+".log"))
	if len(b) > 3000 {
		b = b[len(b)-3000:]
	}
	return string(b)
}

// startControlPlane starts etcd, the API server (token auth, AlwaysAllow,
// Pod Security admission as built in) and the controller-manager.
func startControlPlane(t *testing.T) *controlPlane {
	t.Helper()
	cp := &controlPlane{bin: k8sBinDir(t), dir: t.TempDir()}
	t.Cleanup(func() {
		cp.stop()
		if t.Failed() {
			for _, n := range []string{"etcd", "kube-apiserver", "kube-controller-manager"} {
				t.Logf("--- %s log (tail):\n%s", n, cp.logTail(n))
			}
		}
	})
	certs(t, cp.dir)
	const token = "threatview-install-test-token"
	if err := os.WriteFile(filepath.Join(cp.dir, "tokens.csv"), []byte(token+",admin,admin,system:masters\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	etcdClient, etcdPeer, apiPort := freePort(t), freePort(t), freePort(t)
	cp.start(t, "etcd", "--name", "default", "--data-dir", filepath.Join(cp.dir, "etcd"),
		"--listen-client-urls", fmt.Sprintf("http://127.0.0.1:%d", etcdClient),
		"--advertise-client-urls", fmt.Sprintf("http://127.0.0.1:%d", etcdClient),
		"--listen-peer-urls", fmt.Sprintf("http://127.0.0.1:%d", etcdPeer),
		"--initial-advertise-peer-urls", fmt.Sprintf("http://127.0.0.1:%d", etcdPeer),
		"--initial-cluster", fmt.Sprintf("default=http://127.0.0.1:%d", etcdPeer),
		"--log-level", "warn", "--quota-backend-bytes", "1073741824")
	cp.start(t, "kube-apiserver",
		"--etcd-servers", fmt.Sprintf("http://127.0.0.1:%d", etcdClient),
		"--bind-address", "127.0.0.1", "--advertise-address", "127.0.0.1",
		"--secure-port", fmt.Sprint(apiPort),
		"--tls-cert-file", filepath.Join(cp.dir, "apiserver.crt"),
		"--tls-private-key-file", filepath.Join(cp.dir, "apiserver.key"),
		"--token-auth-file", filepath.Join(cp.dir, "tokens.csv"),
		"--authorization-mode", "AlwaysAllow",
		"--service-account-issuer", "https://kubernetes.default.svc",
		"--service-account-key-file", filepath.Join(cp.dir, "sa.pub"),
		"--service-account-signing-key-file", filepath.Join(cp.dir, "sa.key"),
		"--service-cluster-ip-range", "10.96.0.0/16",
		"--endpoint-reconciler-type", "none",
		"--v", "1")
	cp.kubeconfig = filepath.Join(cp.dir, "kubeconfig")
	ca, err := os.ReadFile(filepath.Join(cp.dir, "apiserver.crt"))
	if err != nil {
		t.Fatal(err)
	}
	kc := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: local
  cluster:
    server: https://127.0.0.1:%d
    certificate-authority-data: %s
users:
- name: admin
  user:
    token: %s
contexts:
- name: local
  context: {cluster: local, user: admin}
current-context: local
`, apiPort, b64(ca), token)
	if err := os.WriteFile(cp.kubeconfig, []byte(kc), 0o600); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(90 * time.Second)
	for {
		out, err := cp.kubectl(context.Background(), nil, "get", "--raw", "/readyz")
		if err == nil && strings.TrimSpace(out.stdout) == "ok" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the API server is not ready after 90s: %v %s", err, out.stderr)
		}
		time.Sleep(500 * time.Millisecond)
	}
	// The chart's kubeVersion check needs a real version, not the build's placeholder.
	if out, err := cp.kubectl(context.Background(), nil, "version", "-o", "json"); err != nil {
		t.Fatalf("kubectl version: %v %s", err, out.stderr)
	} else {
		var v struct {
			Server struct {
				GitVersion string `json:"gitVersion"`
			} `json:"serverVersion"`
		}
		if err := json.Unmarshal([]byte(out.stdout), &v); err != nil || v.Server.GitVersion != "v"+kubeVersionFlag {
			t.Fatalf("the API server reports version %q (%v), want v%s: rebuild with scripts/k8s.sh", v.Server.GitVersion, err, kubeVersionFlag)
		}
	}
	cp.start(t, "kube-controller-manager",
		"--kubeconfig", cp.kubeconfig,
		"--authentication-kubeconfig", cp.kubeconfig,
		"--authorization-kubeconfig", cp.kubeconfig,
		"--service-account-private-key-file", filepath.Join(cp.dir, "sa.key"),
		"--root-ca-file", filepath.Join(cp.dir, "apiserver.crt"),
		"--leader-elect=false",
		"--bind-address", "127.0.0.1", "--secure-port", fmt.Sprint(freePort(t)),
		"--cert-dir", filepath.Join(cp.dir, "kcm-certs"),
		"--horizontal-pod-autoscaler-sync-period", "5s",
		"--v", "1")
	return cp
}

func b64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }

type cmdOut struct{ stdout, stderr string }

func (cp *controlPlane) kubectl(ctx context.Context, stdin []byte, args ...string) (cmdOut, error) {
	return run(ctx, filepath.Join(cp.bin, "kubectl"), stdin, append([]string{"--kubeconfig", cp.kubeconfig}, args...)...)
}

func run(ctx context.Context, bin string, stdin []byte, args ...string) (cmdOut, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	err := cmd.Run()
	return cmdOut{stdout.String(), stderr.String()}, err
}

// installSets are the values sets installed: those the render tests use plus
// the cost override on its own with every optional object switched on.
func installSets(t *testing.T) map[string][]string {
	sets := valueSets(t)
	sets["everything-on.yaml"] = []string{filepath.Join(chartDir, "ci", "cost-override.yaml"), filepath.Join(chartDir, "ci", "cronjobs-on.yaml")}
	return sets
}

var warning = regexp.MustCompile(`(?im)^warning:`)

func TestInstall_RealAPIServer(t *testing.T) {
	cp := startControlPlane(t)
	ctx := context.Background()
	helm := filepath.Join(cp.bin, "helm")
	sets := installSets(t)
	names := make([]string, 0, len(sets))
	for n := range sets {
		names = append(names, n)
	}
	sort.Strings(names)
	for i, name := range names {
		files := sets[name]
		t.Run(name, func(t *testing.T) {
			ns := fmt.Sprintf("tv-%d", i)
			args := []string{"template", "tv", chartDir, "-n", ns, "--kube-version", kubeVersionFlag, "--include-crds"}
			for _, f := range files {
				args = append(args, "-f", f)
			}
			if name == "everything-on.yaml" {
				args = append(args, "--set", "networkPolicy.enabled=true,dashboards.enabled=true,prometheusRule.enabled=true,serviceMonitor.enabled=true,adminInterface.ingress.enabled=true,migrations.ddlCredentials.enabled=true")
			}
			out, err := run(ctx, helm, nil, args...)
			if err != nil {
				t.Fatalf("helm template: %v\n%s", err, out.stderr)
			}
			manifests := []byte(out.stdout)
			nsDoc := fmt.Sprintf(`apiVersion: v1
kind: Namespace
metadata:
  name: %s
  labels:
    pod-security.kubernetes.io/enforce: restricted
    pod-security.kubernetes.io/enforce-version: latest
    pod-security.kubernetes.io/warn: restricted
    pod-security.kubernetes.io/warn-version: latest
    pod-security.kubernetes.io/audit: restricted
`, ns)
			if o, err := cp.kubectl(ctx, []byte(nsDoc), "apply", "-f", "-"); err != nil {
				t.Fatalf("create namespace: %v\n%s", err, o.stderr)
			}
			// Pods name a ServiceAccount; the controller-manager creates "default".
			for deadline := time.Now().Add(60 * time.Second); ; {
				if _, err := cp.kubectl(ctx, nil, "get", "serviceaccount", "default", "-n", ns); err == nil {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("no default ServiceAccount in %s after 60s", ns)
				}
				time.Sleep(250 * time.Millisecond)
			}
			for _, mode := range [][]string{{"--dry-run=server", "--validate=strict"}, {"--validate=strict"}} {
				o, err := cp.kubectl(ctx, manifests, append([]string{"apply", "-n", ns, "-f", "-"}, mode...)...)
				if err != nil {
					t.Fatalf("kubectl apply %v refused the chart: %v\n%s\n%s", mode, err, o.stderr, o.stdout)
				}
				if warning.MatchString(o.stderr) {
					t.Errorf("kubectl apply %v: the API server gave warnings:\n%s", mode, o.stderr)
				}
			}
			checkPodsCreated(t, cp, ns, manifests)
		})
	}
}

// checkPodsCreated waits until every Deployment has its pods (replicas, or
// the HPA's minimum) and the migration Job has one, all Pending.
func checkPodsCreated(t *testing.T, cp *controlPlane, ns string, manifests []byte) {
	t.Helper()
	ctx := context.Background()
	want := map[string]int{} // component -> pods
	for _, doc := range docSep.Split(string(manifests), -1) {
		m := decodeLoose(t, doc)
		switch m.Kind {
		case "Deployment":
			want[m.Metadata.Labels["app.kubernetes.io/component"]] = max(m.Spec.Replicas, 1)
		case "HorizontalPodAutoscaler":
			want[m.Metadata.Labels["app.kubernetes.io/component"]] = m.Spec.MinReplicas
		case "Job":
			want[m.Metadata.Labels["app.kubernetes.io/component"]] = 1
		}
	}
	if len(want) == 0 {
		t.Fatal("no workloads in the manifests")
	}
	var got map[string]int
	var notPending []string
	deadline := time.Now().Add(90 * time.Second)
	for {
		o, err := cp.kubectl(ctx, nil, "get", "pods", "-n", ns, "-o", "json")
		if err != nil {
			t.Fatalf("get pods: %v %s", err, o.stderr)
		}
		var list struct {
			Items []struct {
				Metadata struct {
					Labels map[string]string `json:"labels"`
					Name   string            `json:"name"`
				} `json:"metadata"`
				Status struct {
					Phase string `json:"phase"`
				} `json:"status"`
			} `json:"items"`
		}
		if err := json.Unmarshal([]byte(o.stdout), &list); err != nil {
			t.Fatal(err)
		}
		got, notPending = map[string]int{}, nil
		for _, p := range list.Items {
			got[p.Metadata.Labels["app.kubernetes.io/component"]]++
			if p.Status.Phase != "Pending" {
				notPending = append(notPending, p.Metadata.Name+"="+p.Status.Phase)
			}
		}
		done := true
		for comp, n := range want {
			if got[comp] < n {
				done = false
			}
		}
		if done {
			break
		}
		if time.Now().After(deadline) {
			ev, _ := cp.kubectl(ctx, nil, "get", "events", "-n", ns, "--field-selector", "type=Warning")
			t.Fatalf("pods after 90s: %v, want %v\nwarning events:\n%s", got, want, ev.stdout)
		}
		time.Sleep(time.Second)
	}
	if len(notPending) > 0 {
		t.Errorf("pods not Pending on a control plane without nodes: %v", notPending)
	}
	t.Logf("pods created: %v", got)
}

type looseObject struct {
	Kind     string `json:"kind"`
	Metadata struct {
		Labels map[string]string `json:"labels"`
	} `json:"metadata"`
	Spec struct {
		Replicas    int `json:"replicas"`
		MinReplicas int `json:"minReplicas"`
	} `json:"spec"`
}

func decodeLoose(t *testing.T, doc string) looseObject {
	t.Helper()
	var o looseObject
	if strings.TrimSpace(doc) == "" {
		return o
	}
	if err := yaml.Unmarshal([]byte(doc), &o); err != nil {
		t.Fatalf("manifest: %v\n%s", err, doc)
	}
	return o
}
