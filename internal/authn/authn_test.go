package authn

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// fakeAPI plays the API server: tokens it knows, and which (user, path) RBAC allows.
type fakeAPI struct {
	mu        sync.Mutex
	users     map[string]authenticationv1.UserInfo // token -> user
	allowed   map[string]bool                      // "user get /path"
	audiences []string                             // confirmed audiences
	fail      error                                // every call fails with this
	tokenN    atomic.Int32
	sarN      atomic.Int32
	lastSAR   authorizationv1.SubjectAccessReviewSpec
	lastTR    authenticationv1.TokenReviewSpec
}

func (f *fakeAPI) clientset() *fake.Clientset {
	cs := fake.NewClientset()
	cs.PrependReactor("create", "tokenreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		f.tokenN.Add(1)
		tr := a.(k8stesting.CreateAction).GetObject().(*authenticationv1.TokenReview).DeepCopy()
		f.mu.Lock()
		defer f.mu.Unlock()
		f.lastTR = tr.Spec
		if f.fail != nil {
			return true, nil, f.fail
		}
		if u, ok := f.users[tr.Spec.Token]; ok {
			tr.Status = authenticationv1.TokenReviewStatus{Authenticated: true, User: u, Audiences: f.audiences}
		} else {
			tr.Status = authenticationv1.TokenReviewStatus{Authenticated: false, Error: "invalid bearer token"}
		}
		return true, tr, nil
	})
	cs.PrependReactor("create", "subjectaccessreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		f.sarN.Add(1)
		sar := a.(k8stesting.CreateAction).GetObject().(*authorizationv1.SubjectAccessReview).DeepCopy()
		f.mu.Lock()
		defer f.mu.Unlock()
		f.lastSAR = sar.Spec
		if f.fail != nil {
			return true, nil, f.fail
		}
		na := sar.Spec.NonResourceAttributes
		if na != nil && f.allowed[sar.Spec.User+" "+na.Verb+" "+na.Path] {
			sar.Status = authorizationv1.SubjectAccessReviewStatus{Allowed: true, Reason: "RBAC: allowed"}
		} else {
			sar.Status = authorizationv1.SubjectAccessReviewStatus{Reason: "no RBAC policy matched"}
		}
		return true, sar, nil
	})
	return cs
}

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time      { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) { c.mu.Lock(); c.t = c.t.Add(d); c.mu.Unlock() }

func newTestServer(t *testing.T, f *fakeAPI, cfg Config) (http.Handler, *clock) {
	t.Helper()
	clk := &clock{t: time.Date(2026, 11, 29, 20, 0, 0, 0, time.UTC)}
	cfg.Now = clk.now
	cs := f.clientset()
	m := New(cfg, cs.AuthenticationV1().TokenReviews(), cs.AuthorizationV1().SubjectAccessReviews())
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name := "anonymous"
		if u, ok := UserFrom(r.Context()); ok {
			name = u.Name
		}
		fmt.Fprintf(w, "ok %s %s", name, r.URL.Path)
	})
	return m.Wrap(next), clk
}

func do(h http.Handler, method, path, authz string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(method, path, nil)
	if authz != "" {
		r.Header.Set("Authorization", authz)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

func prometheusAPI() *fakeAPI {
	return &fakeAPI{
		users: map[string]authenticationv1.UserInfo{
			"prom-token": {Username: "system:serviceaccount:monitoring:prometheus", UID: "uid-1",
				Groups: []string{"system:serviceaccounts", "system:authenticated"},
				Extra:  map[string]authenticationv1.ExtraValue{"authentication.kubernetes.io/pod-name": {"prometheus-0"}}},
			"nobody-token": {Username: "system:serviceaccount:default:nobody", UID: "uid-2"},
		},
		allowed: map[string]bool{"system:serviceaccount:monitoring:prometheus get /metrics": true},
	}
}

func TestStatusCodes(t *testing.T) {
	tests := []struct {
		name, method, path, authz string
		code                      int
		body                      string
		tokenReviews, sars        int32
	}{
		{"no token", "GET", "/metrics", "", 401, "Unauthorized", 0, 0},
		{"basic auth is not a bearer token", "GET", "/metrics", "Basic cHJvbTpwcm9t", 401, "Unauthorized", 0, 0},
		{"empty bearer", "GET", "/metrics", "Bearer   ", 401, "Unauthorized", 0, 0},
		{"invalid token", "GET", "/metrics", "Bearer forged", 401, "Unauthorized", 1, 0},
		{"valid token without RBAC", "GET", "/metrics", "Bearer nobody-token", 403,
			"Forbidden (user=system:serviceaccount:default:nobody, verb=get, path=/metrics): no RBAC policy matched", 1, 1},
		{"valid token, RBAC for another path", "GET", "/v1/drift", "Bearer prom-token", 403, "Forbidden", 1, 1},
		{"valid token with RBAC", "GET", "/metrics", "Bearer prom-token", 200, "ok system:serviceaccount:monitoring:prometheus /metrics", 1, 1},
		{"lower-case scheme", "GET", "/metrics", "bearer prom-token", 200, "ok system:serviceaccount", 1, 1},
		{"HEAD is get", "HEAD", "/metrics", "Bearer prom-token", 200, "", 1, 1},
		{"POST is not get", "POST", "/metrics", "Bearer prom-token", 403, "verb=post", 1, 1},
		{"healthz open", "GET", "/healthz", "", 200, "ok anonymous /healthz", 0, 0},
		{"readyz open", "GET", "/readyz", "", 200, "ok anonymous /readyz", 0, 0},
		{"readyz open even with a bad token", "GET", "/readyz", "Bearer forged", 200, "ok anonymous", 0, 0},
		{"dot-dot does not escape to an open path", "GET", "/healthz/../metrics", "", 401, "Unauthorized", 0, 0},
		{"healthz subpath is not open", "GET", "/healthz/x", "", 401, "Unauthorized", 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := prometheusAPI()
			h, _ := newTestServer(t, f, Config{})
			w := do(h, tt.method, tt.path, tt.authz)
			if w.Code != tt.code {
				t.Fatalf("code = %d, want %d (body %q)", w.Code, tt.code, w.Body.String())
			}
			if !strings.Contains(w.Body.String(), tt.body) {
				t.Errorf("body = %q, want it to contain %q", w.Body.String(), tt.body)
			}
			if tt.code == 401 && w.Header().Get("WWW-Authenticate") != `Bearer realm="netdrift"` {
				t.Errorf("WWW-Authenticate = %q", w.Header().Get("WWW-Authenticate"))
			}
			if got := f.tokenN.Load(); got != tt.tokenReviews {
				t.Errorf("TokenReviews = %d, want %d", got, tt.tokenReviews)
			}
			if got := f.sarN.Load(); got != tt.sars {
				t.Errorf("SubjectAccessReviews = %d, want %d", got, tt.sars)
			}
		})
	}
}

func TestSubjectAccessReviewCarriesTheWholeUser(t *testing.T) {
	f := prometheusAPI()
	h, _ := newTestServer(t, f, Config{})
	if w := do(h, "GET", "/metrics", "Bearer prom-token"); w.Code != 200 {
		t.Fatalf("code %d", w.Code)
	}
	want := authorizationv1.SubjectAccessReviewSpec{
		NonResourceAttributes: &authorizationv1.NonResourceAttributes{Path: "/metrics", Verb: "get"},
		User:                  "system:serviceaccount:monitoring:prometheus",
		UID:                   "uid-1",
		Groups:                []string{"system:serviceaccounts", "system:authenticated"},
		Extra:                 map[string]authorizationv1.ExtraValue{"authentication.kubernetes.io/pod-name": {"prometheus-0"}},
	}
	if !reflect.DeepEqual(f.lastSAR, want) {
		t.Errorf("SubjectAccessReview spec\n got %+v\nwant %+v", f.lastSAR, want)
	}
	if f.lastTR.Token != "prom-token" || f.lastTR.Audiences != nil {
		t.Errorf("TokenReview spec = %+v", f.lastTR)
	}
}

func TestCachingAndExpiry(t *testing.T) {
	f := prometheusAPI()
	h, clk := newTestServer(t, f, Config{})
	expect := func(path, token string, code int, trs, sars int32) {
		t.Helper()
		if w := do(h, "GET", path, "Bearer "+token); w.Code != code {
			t.Fatalf("%s %s: code %d, want %d", token, path, w.Code, code)
		}
		if f.tokenN.Load() != trs || f.sarN.Load() != sars {
			t.Fatalf("%s %s: %d TokenReviews, %d SARs; want %d, %d", token, path, f.tokenN.Load(), f.sarN.Load(), trs, sars)
		}
	}
	for range 5 {
		expect("/metrics", "prom-token", 200, 1, 1) // one review of each for five scrapes
	}
	expect("/v1/status", "prom-token", 403, 1, 2) // token cached, new path asked
	clk.add(59 * time.Second)
	expect("/metrics", "prom-token", 200, 1, 2)
	expect("/v1/status", "prom-token", 403, 1, 3) // denial cached only 10s
	clk.add(2 * time.Second)                      // 61s: allowed answers expired too
	expect("/metrics", "prom-token", 200, 2, 4)

	// A rejected token is remembered for 10s, then asked again.
	expect("/metrics", "forged", 401, 3, 4)
	expect("/metrics", "forged", 401, 3, 4)
	clk.add(10 * time.Second)
	expect("/metrics", "forged", 401, 4, 4)

	// RBAC granted after a 403: effective once the 10s denial expires.
	expect("/metrics", "nobody-token", 403, 5, 5)
	f.mu.Lock()
	f.allowed["system:serviceaccount:default:nobody get /metrics"] = true
	f.mu.Unlock()
	expect("/metrics", "nobody-token", 403, 5, 5)
	clk.add(10 * time.Second)
	expect("/metrics", "nobody-token", 200, 5, 6)
}

func TestAPIErrorsAre503AndNotCached(t *testing.T) {
	f := prometheusAPI()
	f.fail = errors.New("connection refused")
	h, _ := newTestServer(t, f, Config{})
	for i := 1; i <= 2; i++ {
		w := do(h, "GET", "/metrics", "Bearer prom-token")
		if w.Code != http.StatusServiceUnavailable || !strings.Contains(w.Body.String(), "authentication unavailable") {
			t.Fatalf("try %d: %d %q", i, w.Code, w.Body.String())
		}
		if f.tokenN.Load() != int32(i) {
			t.Fatalf("try %d: %d TokenReviews: a failure must not be cached", i, f.tokenN.Load())
		}
	}
	// Authentication recovers; authorization still fails.
	f.mu.Lock()
	f.fail = nil
	f.mu.Unlock()
	if w := do(h, "GET", "/metrics", "Bearer prom-token"); w.Code != 200 {
		t.Fatalf("after recovery: %d", w.Code)
	}
	h2, _ := newTestServer(t, f, Config{})
	if w := do(h2, "GET", "/metrics", "Bearer prom-token"); w.Code != 200 {
		t.Fatalf("fresh middleware: %d", w.Code)
	}
	f.mu.Lock()
	f.fail = errors.New("etcdserver: request timed out")
	f.mu.Unlock()
	h3, _ := newTestServer(t, f, Config{})
	w := do(h3, "GET", "/metrics", "Bearer prom-token")
	if w.Code != http.StatusServiceUnavailable {
		t.Fatalf("TokenReview failing: %d", w.Code)
	}
}

func TestSARFailureIs503(t *testing.T) {
	f := prometheusAPI()
	cs := f.clientset()
	cs.PrependReactor("create", "subjectaccessreviews", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, errors.New("the server is currently unable to handle the request")
	})
	m := New(Config{}, cs.AuthenticationV1().TokenReviews(), cs.AuthorizationV1().SubjectAccessReviews())
	h := m.Wrap(http.NotFoundHandler())
	w := do(h, "GET", "/metrics", "Bearer prom-token")
	if w.Code != http.StatusServiceUnavailable || !strings.Contains(w.Body.String(), "authorization unavailable") {
		t.Fatalf("%d %q", w.Code, w.Body.String())
	}
}

func TestAudiences(t *testing.T) {
	f := prometheusAPI()
	h, _ := newTestServer(t, f, Config{Audiences: []string{"netdrift"}})
	if w := do(h, "GET", "/metrics", "Bearer prom-token"); w.Code != 401 {
		t.Fatalf("token not confirmed for audience netdrift: code %d, want 401", w.Code)
	}
	if !reflect.DeepEqual(f.lastTR.Audiences, []string{"netdrift"}) {
		t.Fatalf("TokenReview audiences = %v", f.lastTR.Audiences)
	}
	f2 := prometheusAPI()
	f2.audiences = []string{"netdrift"}
	h2, _ := newTestServer(t, f2, Config{Audiences: []string{"netdrift"}})
	if w := do(h2, "GET", "/metrics", "Bearer prom-token"); w.Code != 200 {
		t.Fatalf("audience confirmed: code %d, want 200", w.Code)
	}
}

// Many scrapes arriving together with one token cost one TokenReview and one SAR.
func TestConcurrentRequestsShareOneReview(t *testing.T) {
	f := prometheusAPI()
	h, _ := newTestServer(t, f, Config{})
	var wg sync.WaitGroup
	codes := make([]int, 64)
	for i := range codes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			codes[i] = do(h, "GET", "/metrics", "Bearer prom-token").Code
		}()
	}
	wg.Wait()
	for i, c := range codes {
		if c != 200 {
			t.Fatalf("request %d: %d", i, c)
		}
	}
	if f.tokenN.Load() != 1 || f.sarN.Load() != 1 {
		t.Fatalf("%d TokenReviews, %d SARs for 64 concurrent requests; want 1, 1", f.tokenN.Load(), f.sarN.Load())
	}
}

func TestDecisionKeyDistinguishesEveryField(t *testing.T) {
	base := User{Name: "u", UID: "1", Groups: []string{"a", "b"}, Extra: map[string][]string{"k": {"v"}}}
	attrs := requestAttributes{Verb: "get", Path: "/metrics"}
	k := decisionKey(base, attrs)
	same := base
	same.Groups = []string{"b", "a"}
	if decisionKey(same, attrs) != k {
		t.Error("group order changed the key")
	}
	variants := []User{
		{Name: "v", UID: "1", Groups: base.Groups, Extra: base.Extra},
		{Name: "u", UID: "2", Groups: base.Groups, Extra: base.Extra},
		{Name: "u", UID: "1", Groups: []string{"a"}, Extra: base.Extra},
		{Name: "u", UID: "1", Groups: []string{"a|b"}, Extra: base.Extra},
		{Name: "u", UID: "1", Groups: base.Groups},
		{Name: "u", UID: "1", Groups: base.Groups, Extra: map[string][]string{"k": {"w"}}},
	}
	for i, v := range variants {
		if decisionKey(v, attrs) == k {
			t.Errorf("variant %d shares the key", i)
		}
	}
	if decisionKey(base, requestAttributes{Verb: "get", Path: "/v1/drift"}) == k ||
		decisionKey(base, requestAttributes{Verb: "post", Path: "/metrics"}) == k {
		t.Error("attributes do not change the key")
	}
}
