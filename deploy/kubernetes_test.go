package deploy

import (
	"fmt"
	"maps"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/robfig/cron/v3"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"

	"github.com/shardmart/shardmart/internal/placement"
)

const (
	kubernetesDir = "kubernetes"
	// placeholder marks every example secret value.
	placeholder = "REPLACE-ME"
	// image is the image name the manifests use; kustomization.yaml maps it to a registry's.
	image = "shardmart"
)

// kustomization holds the fields of kustomization.yaml this directory uses. kustomize's own
// type would bring its whole API into go.mod; decoded strictly, a field outside these fails
// and is added here when the file starts using it.
type kustomization struct {
	APIVersion string   `json:"apiVersion"`
	Kind       string   `json:"kind"`
	Namespace  string   `json:"namespace,omitempty"`
	Resources  []string `json:"resources"`
	Images     []struct {
		Name    string `json:"name"`
		NewName string `json:"newName,omitempty"`
		NewTag  string `json:"newTag,omitempty"`
	} `json:"images,omitempty"`
}

// manifests are the objects of the kustomization, by kind.
type manifests struct {
	kust         kustomization
	deployments  []*appsv1.Deployment
	cronJobs     []*batchv1.CronJob
	services     []*corev1.Service
	configMaps   map[string]*corev1.ConfigMap
	secrets      map[string]*corev1.Secret
	disruptions  []*policyv1.PodDisruptionBudget
	objectsCount int
}

var docSeparator = regexp.MustCompile(`(?m)^---[ \t]*$`)

// decodeStrict decodes one YAML document into the official type of its kind: an unknown or
// misspelt field, a duplicate key or a value of the wrong type is an error.
func (m *manifests) decodeStrict(file string, doc []byte) error {
	var tm metav1.TypeMeta
	if err := yaml.Unmarshal(doc, &tm); err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	var obj any
	switch tm.APIVersion + " " + tm.Kind {
	case "apps/v1 Deployment":
		d := &appsv1.Deployment{}
		m.deployments, obj = append(m.deployments, d), d
	case "batch/v1 CronJob":
		c := &batchv1.CronJob{}
		m.cronJobs, obj = append(m.cronJobs, c), c
	case "v1 Service":
		s := &corev1.Service{}
		m.services, obj = append(m.services, s), s
	case "v1 ConfigMap":
		c := &corev1.ConfigMap{}
		obj = c
		defer func() { m.configMaps[c.Name] = c }()
	case "v1 Secret":
		s := &corev1.Secret{}
		obj = s
		defer func() { m.secrets[s.Name] = s }()
	case "policy/v1 PodDisruptionBudget":
		p := &policyv1.PodDisruptionBudget{}
		m.disruptions, obj = append(m.disruptions, p), p
	default:
		return fmt.Errorf("%s: %s %s: a kind this check does not decode (add its type)", file, tm.APIVersion, tm.Kind)
	}
	m.objectsCount++
	if err := yaml.UnmarshalStrict(doc, obj); err != nil {
		return fmt.Errorf("%s: %s: %w", file, tm.Kind, err)
	}
	return nil
}

// loadManifests reads kustomization.yaml and every object of its resources.
func loadManifests(dir string) (*manifests, error) {
	m := &manifests{configMaps: map[string]*corev1.ConfigMap{}, secrets: map[string]*corev1.Secret{}}
	b, err := os.ReadFile(filepath.Join(dir, "kustomization.yaml"))
	if err != nil {
		return nil, err
	}
	if err := yaml.UnmarshalStrict(b, &m.kust); err != nil {
		return nil, fmt.Errorf("kustomization.yaml: %w", err)
	}
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		return nil, err
	}
	var listed []string
	for _, f := range files {
		if filepath.Base(f) != "kustomization.yaml" {
			listed = append(listed, filepath.Base(f))
		}
	}
	if got := slices.Sorted(slices.Values(m.kust.Resources)); !slices.Equal(got, listed) {
		return nil, fmt.Errorf("kustomization.yaml resources %v, want every manifest here: %v", got, listed)
	}
	for _, r := range m.kust.Resources {
		b, err := os.ReadFile(filepath.Join(dir, r))
		if err != nil {
			return nil, err
		}
		for _, doc := range docSeparator.Split(string(b), -1) {
			if strings.TrimSpace(stripComments(doc)) == "" {
				continue
			}
			if err := m.decodeStrict(r, []byte(doc)); err != nil {
				return nil, err
			}
		}
	}
	return m, nil
}

func stripComments(doc string) string {
	var out []string
	for _, l := range strings.Split(doc, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(l), "#") {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// workload is a pod template and what owns it.
type workload struct {
	name string
	pod  *corev1.PodTemplateSpec
}

func (m *manifests) workloads() []workload {
	var out []workload
	for _, d := range m.deployments {
		out = append(out, workload{"Deployment " + d.Name, &d.Spec.Template})
	}
	for _, c := range m.cronJobs {
		out = append(out, workload{"CronJob " + c.Name, &c.Spec.JobTemplate.Spec.Template})
	}
	return out
}

// containerEnv is the environment a container gets: envFrom's ConfigMaps and Secrets first,
// then env (which wins).
func (m *manifests) containerEnv(c corev1.Container) map[string]string {
	env := map[string]string{}
	for _, from := range c.EnvFrom {
		switch {
		case from.ConfigMapRef != nil && m.configMaps[from.ConfigMapRef.Name] != nil:
			maps.Copy(env, m.configMaps[from.ConfigMapRef.Name].Data)
		case from.SecretRef != nil && m.secrets[from.SecretRef.Name] != nil:
			maps.Copy(env, m.secrets[from.SecretRef.Name].StringData)
		}
	}
	for _, e := range c.Env {
		env[e.Name] = e.Value
	}
	return env
}

// mountedFile reports whether path is a mount point of c or a key of the Secret or ConfigMap
// mounted at its directory.
func (m *manifests) mountedFile(pod *corev1.PodSpec, c corev1.Container, path string) bool {
	for _, vm := range c.VolumeMounts {
		if path == vm.MountPath {
			return true
		}
		if filepath.Dir(path) != vm.MountPath {
			continue
		}
		key := filepath.Base(path)
		for _, v := range pod.Volumes {
			switch {
			case v.Name != vm.Name:
			case v.Secret != nil && m.secrets[v.Secret.SecretName] != nil:
				_, ok := m.secrets[v.Secret.SecretName].StringData[key]
				return ok
			case v.ConfigMap != nil && m.configMaps[v.ConfigMap.Name] != nil:
				_, ok := m.configMaps[v.ConfigMap.Name].Data[key]
				return ok
			}
		}
	}
	return false
}

// listenPort is the port of a --addr flag or, without one, of the variable that sets it.
func listenPort(args []string, env map[string]string, envName string) (int, error) {
	addr, given := env[envName], false
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, "--addr="); ok {
			addr, given = v, true
		}
	}
	if addr == "" {
		return 0, fmt.Errorf("no --addr and no %s", envName)
	}
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		return 0, fmt.Errorf("address %q (from --addr: %v): %w", addr, given, err)
	}
	return strconv.Atoi(p)
}

// portOf resolves a probe's or Service's port against the container's ports.
func portOf(c corev1.Container, p intstr.IntOrString) (int32, bool) {
	for _, cp := range c.Ports {
		if (p.Type == intstr.String && p.StrVal == cp.Name) || (p.Type == intstr.Int && p.IntVal == cp.ContainerPort) {
			return cp.ContainerPort, true
		}
	}
	return 0, false
}

func labelsMatch(selector, labels map[string]string) bool {
	if len(selector) == 0 {
		return false
	}
	for k, v := range selector {
		if labels[k] != v {
			return false
		}
	}
	return true
}

// checkManifests checks the objects against each other and against shardmart itself; each
// returned error is one finding.
func checkManifests(t *testing.T, m *manifests) []error {
	t.Helper()
	var errs []error
	fail := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	known := knownEnv(t)
	shutdown, err := time.ParseDuration(flagDefault(t, []string{"serve"}, "shutdown-timeout"))
	if err != nil {
		t.Fatal(err)
	}

	if len(m.kust.Images) != 1 || m.kust.Images[0].Name != image {
		fail("kustomization.yaml images %+v: want one entry renaming %q", m.kust.Images, image)
	}
	for name, cm := range m.configMaps {
		if name != "shardmart-env" {
			continue
		}
		for k := range cm.Data {
			if err := checkEnvName(k, known); err != nil {
				fail("ConfigMap %s: %v", name, err)
			}
		}
	}
	for name, s := range m.secrets {
		if len(s.Data) > 0 {
			fail("Secret %s: data (base64) hides whether a value is a placeholder: use stringData", name)
		}
		for k, v := range s.StringData {
			if !strings.Contains(v, placeholder) {
				fail("Secret %s key %s: the example value is not marked %s", name, k, placeholder)
			}
		}
	}

	for _, w := range m.workloads() {
		pod := &w.pod.Spec
		if sc := pod.SecurityContext; sc == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot {
			fail("%s: the pod does not set runAsNonRoot: true", w.name)
		}
		volumes := map[string]bool{}
		for _, v := range pod.Volumes {
			volumes[v.Name] = true
			if v.Secret != nil && m.secrets[v.Secret.SecretName] == nil {
				fail("%s: volume %s mounts Secret %s, which is not here", w.name, v.Name, v.Secret.SecretName)
			}
			if v.ConfigMap != nil && m.configMaps[v.ConfigMap.Name] == nil {
				fail("%s: volume %s mounts ConfigMap %s, which is not here", w.name, v.Name, v.ConfigMap.Name)
			}
		}
		for _, c := range append(slices.Clone(pod.InitContainers), pod.Containers...) {
			where := w.name + " container " + c.Name
			if c.Image != image {
				fail("%s: image %q, want %q (kustomization.yaml names the registry's)", where, c.Image, image)
			}
			if err := checkCommand(append(slices.Clone(c.Command), c.Args...)); err != nil {
				fail("%s: %v", where, err)
			}
			if sc := c.SecurityContext; sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem ||
				sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation ||
				sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) {
				fail("%s: securityContext must set readOnlyRootFilesystem: true, allowPrivilegeEscalation: false, capabilities.drop [ALL]", where)
			}
			if c.Resources.Requests.Cpu().IsZero() || c.Resources.Requests.Memory().IsZero() || c.Resources.Limits.Memory().IsZero() {
				fail("%s: resources must request cpu and memory and limit memory", where)
			}
			for _, from := range c.EnvFrom {
				if from.ConfigMapRef != nil && m.configMaps[from.ConfigMapRef.Name] == nil {
					fail("%s: envFrom ConfigMap %s is not here", where, from.ConfigMapRef.Name)
				}
				if from.SecretRef != nil && m.secrets[from.SecretRef.Name] == nil {
					fail("%s: envFrom Secret %s is not here", where, from.SecretRef.Name)
				}
			}
			for _, e := range c.Env {
				if err := checkEnvName(e.Name, known); err != nil {
					fail("%s: %v", where, err)
				}
				if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
					ref := e.ValueFrom.SecretKeyRef
					if s := m.secrets[ref.Name]; s == nil || s.StringData[ref.Key] == "" {
						fail("%s: %s from Secret %s key %s, which is not here", where, e.Name, ref.Name, ref.Key)
					}
				}
			}
			for _, vm := range c.VolumeMounts {
				if !volumes[vm.Name] {
					fail("%s: mounts volume %s, which the pod does not declare", where, vm.Name)
				}
			}
			// Every file or directory named by a flag, by a variable the container sets itself, or
			// by a shared variable its command reads, must be mounted.
			reads := commandEnv(append(slices.Clone(c.Command), c.Args...))
			var paths []string
			for k, v := range m.containerEnv(c) {
				if strings.HasPrefix(v, "/") && (slices.Contains(reads, k) || slices.ContainsFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == k })) {
					paths = append(paths, k+"="+v)
				}
			}
			for _, a := range c.Args {
				if _, v, ok := strings.Cut(a, "="); ok && strings.HasPrefix(v, "/") {
					paths = append(paths, a)
				}
			}
			for _, p := range paths {
				_, path, _ := strings.Cut(p, "=")
				if !m.mountedFile(pod, c, path) {
					fail("%s: %s: no volume mounted there holds it", where, p)
				}
			}
		}
	}

	for _, d := range m.deployments {
		where := "Deployment " + d.Name
		if d.Spec.Selector == nil || !labelsMatch(d.Spec.Selector.MatchLabels, d.Spec.Template.Labels) {
			fail("%s: selector does not match its pod labels %v", where, d.Spec.Template.Labels)
		}
		c := d.Spec.Template.Spec.Containers[0]
		args := c.Args
		env := m.containerEnv(c)
		switch {
		case len(args) > 0 && args[0] == "serve":
			checkServe(d, c, env, shutdown, fail)
		case len(args) > 0 && args[0] == "monitor":
			checkScrape(d, c, env, "", fail)
		case slices.Equal(args[:min(len(args), len(repairCommand))], repairCommand):
			if d.Spec.Replicas == nil || *d.Spec.Replicas != 1 || d.Spec.Strategy.Type != appsv1.RecreateDeploymentStrategyType {
				fail("%s: the repair scheduler must be a singleton: replicas 1, strategy Recreate", where)
			}
			if !slices.ContainsFunc(args, func(a string) bool { return strings.HasPrefix(a, "--schedule") }) {
				fail("%s: cassandra repair without --schedule runs once and exits", where)
			}
		default:
			fail("%s: runs %v, which is none of serve, monitor, cassandra repair", where, args)
		}
	}

	for _, s := range m.services {
		var backs []*appsv1.Deployment
		for _, d := range m.deployments {
			if labelsMatch(s.Spec.Selector, d.Spec.Template.Labels) {
				backs = append(backs, d)
			}
		}
		if len(backs) != 1 {
			fail("Service %s: selector %v matches %d Deployments' pods, want 1", s.Name, s.Spec.Selector, len(backs))
			continue
		}
		for _, p := range s.Spec.Ports {
			if _, ok := portOf(backs[0].Spec.Template.Spec.Containers[0], p.TargetPort); !ok {
				fail("Service %s port %s: targetPort %s is no port of Deployment %s", s.Name, p.Name, p.TargetPort.String(), backs[0].Name)
			}
		}
	}
	for _, p := range m.disruptions {
		if p.Spec.Selector == nil || !slices.ContainsFunc(m.deployments, func(d *appsv1.Deployment) bool {
			return labelsMatch(p.Spec.Selector.MatchLabels, d.Spec.Template.Labels)
		}) {
			fail("PodDisruptionBudget %s: selector matches no Deployment's pods", p.Name)
		}
	}
	for _, c := range m.cronJobs {
		if _, err := cron.ParseStandard(c.Spec.Schedule); err != nil {
			fail("CronJob %s: schedule %q: %v", c.Name, c.Spec.Schedule, err)
		}
		if c.Spec.ConcurrencyPolicy != batchv1.ForbidConcurrent {
			fail("CronJob %s: concurrencyPolicy %q, want Forbid", c.Name, c.Spec.ConcurrencyPolicy)
		}
	}
	return errs
}

// checkServe checks the API's Deployment: probes on the port it listens on, a placement its
// replicas can share, a grace period covering its shutdown, scrape annotations.
func checkServe(d *appsv1.Deployment, c corev1.Container, env map[string]string, shutdown time.Duration, fail func(string, ...any)) {
	where := "Deployment " + d.Name
	for _, p := range []struct {
		name, path string
		probe      *corev1.Probe
	}{{"readinessProbe", "/readyz", c.ReadinessProbe}, {"livenessProbe", "/healthz", c.LivenessProbe}} {
		if p.probe == nil || p.probe.HTTPGet == nil {
			fail("%s: no %s over HTTP", where, p.name)
			continue
		}
		if p.probe.HTTPGet.Path != p.path {
			fail("%s: %s path %q, want %s", where, p.name, p.probe.HTTPGet.Path, p.path)
		}
		if _, ok := portOf(c, p.probe.HTTPGet.Port); !ok {
			fail("%s: %s port %s is not a port of the container", where, p.name, p.probe.HTTPGet.Port.String())
		}
	}
	checkScrape(d, c, env, "SHARDMART_ADDR", fail)
	if d.Spec.Replicas != nil && *d.Spec.Replicas > 1 {
		if pl, err := placement.Parse(env["SHARDMART_PLACEMENT"]); err != nil {
			fail("%s: SHARDMART_PLACEMENT: %v", where, err)
		} else if pl.Uses(placement.SQLite) {
			fail("%s: %d replicas, but SHARDMART_PLACEMENT %q keeps a family on the embedded store (one process locks it)", where, *d.Spec.Replicas, env["SHARDMART_PLACEMENT"])
		}
	}
	var preStop time.Duration
	if c.Lifecycle != nil && c.Lifecycle.PreStop != nil && c.Lifecycle.PreStop.Sleep != nil {
		preStop = time.Duration(c.Lifecycle.PreStop.Sleep.Seconds) * time.Second
	}
	grace := 30 * time.Second // the API server's default
	if g := d.Spec.Template.Spec.TerminationGracePeriodSeconds; g != nil {
		grace = time.Duration(*g) * time.Second
	}
	if need := preStop + shutdown + traceFlush; grace < need {
		fail("%s: terminationGracePeriodSeconds %s is shorter than the preStop sleep (%s) + serve's --shutdown-timeout (%s) + the traces' flush (%s)",
			where, grace, preStop, shutdown, traceFlush)
	}
}

// checkScrape checks that the container listens on its declared port and that the pod's
// Prometheus annotations point at it.
func checkScrape(d *appsv1.Deployment, c corev1.Container, env map[string]string, addrEnv string, fail func(string, ...any)) {
	where := "Deployment " + d.Name
	port, err := listenPort(c.Args, env, addrEnv)
	if err != nil {
		fail("%s: listen address: %v", where, err)
		return
	}
	if _, ok := portOf(c, intstr.FromInt32(int32(port))); !ok {
		fail("%s: listens on port %d, which the container does not declare", where, port)
	}
	a := d.Spec.Template.Annotations
	if a["prometheus.io/scrape"] != "true" || a["prometheus.io/port"] != strconv.Itoa(port) || a["prometheus.io/path"] != "/metrics" {
		fail("%s: scrape annotations %v, want scrape \"true\", port %d, path /metrics", where, a, port)
	}
}

func TestKubernetesManifests(t *testing.T) {
	m, err := loadManifests(kubernetesDir)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d objects decoded strictly", m.objectsCount)
	for _, err := range checkManifests(t, m) {
		t.Error(err)
	}
}

// An edit of one manifest: the file, the text replaced, and what the failure must say.
type manifestEdit struct{ file, from, to, want string }

func editedManifests(t *testing.T, e manifestEdit) (*manifests, error) {
	t.Helper()
	dir := t.TempDir()
	files, err := filepath.Glob(filepath.Join(kubernetesDir, "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		s := string(b)
		if filepath.Base(f) == e.file {
			if !strings.Contains(s, e.from) {
				t.Fatalf("%s has no %q", e.file, e.from)
			}
			s = strings.Replace(s, e.from, e.to, 1)
		}
		if err := os.WriteFile(filepath.Join(dir, filepath.Base(f)), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return loadManifests(dir)
}

// Strict decoding refuses a misspelt field at the top, deep in a pod, a value of the wrong
// type, a duplicate key, and a kustomization field it does not know.
func TestKubernetesDecodingRefuses(t *testing.T) {
	for name, e := range map[string]manifestEdit{
		"misspelt probe":    {"serve.yaml", "readinessProbe:", "readinesProbe:", `unknown field "readinesProbe"`},
		"misspelt deep":     {"serve.yaml", "timeoutSeconds: 2\n            failureThreshold: 2", "timeoutSecond: 2\n            failureThreshold: 2", `unknown field "timeoutSecond"`},
		"misspelt top":      {"monitor.yaml", "spec:\n  replicas: 1", "spec:\n  replica: 1", `unknown field "replica"`},
		"wrong type":        {"repair.yaml", "replicas: 1", "replicas: one", "cannot unmarshal"},
		"duplicate key":     {"config.yaml", "  SHARDMART_MONGO_DB: shardmart\n", "  SHARDMART_MONGO_DB: shardmart\n  SHARDMART_MONGO_DB: other\n", `key "SHARDMART_MONGO_DB" already set`},
		"cronjob field":     {"firehose-roll.yaml", "concurrencyPolicy: Forbid", "concurrency: Forbid", `unknown field "concurrency"`},
		"kustomization key": {"kustomization.yaml", "images:", "image:", "unknown field"},
		"unlisted manifest": {"kustomization.yaml", "  - monitor.yaml\n", "", "want every manifest here"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := editedManifests(t, e)
			if err == nil || !strings.Contains(err.Error(), e.want) {
				t.Fatalf("error %v, want one saying %q", err, e.want)
			}
			t.Log(err)
		})
	}
}

// The semantic checks refuse each broken link between the objects and shardmart.
func TestKubernetesChecksRefuse(t *testing.T) {
	for name, e := range map[string]manifestEdit{
		"service selector":         {"serve.yaml", "  selector:\n    app.kubernetes.io/name: shardmart\n    app.kubernetes.io/component: serve\n  ports:", "  selector:\n    app.kubernetes.io/name: shardmart\n    app.kubernetes.io/component: api\n  ports:", "matches 0 Deployments"},
		"service target port":      {"serve.yaml", "targetPort: http", "targetPort: web", "targetPort web is no port"},
		"readiness path":           {"serve.yaml", "path: /readyz", "path: /ready", `readinessProbe path "/ready"`},
		"liveness port":            {"serve.yaml", "path: /healthz\n              port: http", "path: /healthz\n              port: 8081", "livenessProbe port 8081"},
		"listen port":              {"config.yaml", `SHARDMART_ADDR: ":8080"`, `SHARDMART_ADDR: ":9090"`, "listens on port 9090"},
		"scrape port":              {"monitor.yaml", `prometheus.io/port: "9108"`, `prometheus.io/port: "9100"`, "scrape annotations"},
		"unknown variable":         {"config.yaml", "SHARDMART_MONGO_DB:", "SHARDMART_MONGO_DATABASE:", "SHARDMART_MONGO_DATABASE is read by nothing"},
		"unknown flag":             {"monitor.yaml", `"--addr=:9108"`, `"--listen=:9108"`, "unknown flag: --listen"},
		"missing secret":           {"serve.yaml", "secretName: shardmart-cassandra-tls", "secretName: cassandra-tls", "Secret cassandra-tls, which is not here"},
		"missing configmap":        {"firehose-roll.yaml", "name: shardmart-env", "name: shardmart-config", "ConfigMap shardmart-config is not here"},
		"file not mounted":         {"config.yaml", "/etc/shardmart/cassandra-tls/ca.crt", "/etc/shardmart/cassandra-tls/ca.pem", "SHARDMART_CASSANDRA_TLS_CA=/etc/shardmart/cassandra-tls/ca.pem: no volume"},
		"secret not a placeholder": {"secrets.yaml", "SHARDMART_CASSANDRA_PASSWORD: REPLACE-ME-placeholder", "SHARDMART_CASSANDRA_PASSWORD: hunter2", "not marked REPLACE-ME"},
		"repair not a singleton":   {"repair.yaml", "type: Recreate", "type: RollingUpdate", "singleton"},
		"short grace":              {"serve.yaml", "terminationGracePeriodSeconds: 30", "terminationGracePeriodSeconds: 15", "terminationGracePeriodSeconds 15s is shorter"},
		"shared sqlite":            {"config.yaml", "SHARDMART_PLACEMENT: orders=mongo,", "SHARDMART_PLACEMENT: orders=sqlite,", "keeps a family on the embedded store"},
		"writable root":            {"monitor.yaml", "readOnlyRootFilesystem: true", "readOnlyRootFilesystem: false", "readOnlyRootFilesystem: true"},
		"bad schedule":             {"firehose-roll.yaml", `schedule: "5 0 * * *"`, `schedule: "5 0 * *"`, "expected exactly 5 fields"},
		"pdb selector":             {"serve.yaml", "spec:\n  maxUnavailable: 1\n  selector:\n    matchLabels:\n      app.kubernetes.io/name: shardmart", "spec:\n  maxUnavailable: 1\n  selector:\n    matchLabels:\n      app.kubernetes.io/name: shop", "PodDisruptionBudget shardmart-serve: selector matches no"},
		"undeclared volume":        {"repair.yaml", "            - name: jmx\n              mountPath", "            - name: jmx-password\n              mountPath", "mounts volume jmx-password, which the pod does not declare"},
	} {
		t.Run(name, func(t *testing.T) {
			m, err := editedManifests(t, e)
			if err != nil {
				t.Fatal(err)
			}
			errs := checkManifests(t, m)
			if len(errs) == 0 || !slices.ContainsFunc(errs, func(err error) bool { return strings.Contains(err.Error(), e.want) }) {
				t.Fatalf("findings %v, want one saying %q", errs, e.want)
			}
			t.Log(errs[0])
		})
	}
}
