// Package authn guards netdrift's secure endpoint (--secure-listen) the way the kubelet and
// kube-rbac-proxy guard theirs: the caller's bearer token is checked with a TokenReview, the
// request with a SubjectAccessReview, both against the API server, and both answers are
// cached briefly. /healthz and /readyz stay open for the kubelet's probes.
//
// Authorization uses non-resource attributes: the request path and the verb "get" (HEAD and
// GET), so RBAC grants access with
//
//	rules:
//	- nonResourceURLs: ["/metrics"]          # Prometheus
//	  verbs: ["get"]
//	- nonResourceURLs: ["/metrics", "/v1/*"] # responders (netdrift status|drift|lag ...)
//	  verbs: ["get"]
//
// Prometheus Operator's and kube-prometheus' Prometheus ClusterRoles already carry the first
// rule, so scraping works without extra RBAC. (A virtual resource such as nodes/proxy, the
// kubelet's choice, would grant far more than netdrift's read-only API.)
//
// Responses: 401 without a token or with one the API server rejects, 403 when RBAC denies
// the request, 503 when the API server cannot be asked (never cached).
package authn

import (
	"context"
	"log/slog"
	"net/http"
	"path"
	"strings"
	"time"

	authenticationv1client "k8s.io/client-go/kubernetes/typed/authentication/v1"
	authorizationv1client "k8s.io/client-go/kubernetes/typed/authorization/v1"
)

// Config tunes the middleware. The zero value is usable: see Defaults.
type Config struct {
	// OpenPaths are served without authentication (exact, cleaned paths).
	OpenPaths []string
	// Audiences, when set, are requested in every TokenReview and at least one must be
	// confirmed by the API server. Empty: the API server's own audiences.
	Audiences []string
	// How long answers are cached. Failures are cached shorter, so a grant made after a
	// 403 takes effect quickly, while a flood of bad tokens still costs the API server little.
	AuthnTTL, AuthnFailureTTL time.Duration
	AuthzTTL, AuthzFailureTTL time.Duration
	// MaxCacheEntries bounds each cache (tokens and decisions).
	MaxCacheEntries int
	// ReviewTimeout bounds one TokenReview or SubjectAccessReview call.
	ReviewTimeout time.Duration
	// Now is the clock (tests inject one).
	Now func() time.Time
	// Logger receives API errors and denials (debug). Nil: discard.
	Logger *slog.Logger
}

// Defaults returns cfg with every unset field filled in.
func (cfg Config) Defaults() Config {
	if cfg.OpenPaths == nil {
		cfg.OpenPaths = []string{"/healthz", "/readyz"}
	}
	setDur(&cfg.AuthnTTL, time.Minute)
	setDur(&cfg.AuthnFailureTTL, 10*time.Second)
	setDur(&cfg.AuthzTTL, time.Minute)
	setDur(&cfg.AuthzFailureTTL, 10*time.Second)
	setDur(&cfg.ReviewTimeout, 10*time.Second)
	if cfg.MaxCacheEntries <= 0 {
		cfg.MaxCacheEntries = 4096
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return cfg
}

func setDur(d *time.Duration, def time.Duration) {
	if *d <= 0 {
		*d = def
	}
}

// Middleware authenticates and authorizes requests through the API server.
type Middleware struct {
	cfg    Config
	open   map[string]bool
	authn  *tokenAuthenticator
	authz  *accessAuthorizer
	logger *slog.Logger
}

// New returns a middleware asking the API server through the given clients
// (clientset.AuthenticationV1().TokenReviews(), clientset.AuthorizationV1().SubjectAccessReviews()).
func New(cfg Config, tokens authenticationv1client.TokenReviewInterface,
	access authorizationv1client.SubjectAccessReviewInterface) *Middleware {
	cfg = cfg.Defaults()
	m := &Middleware{cfg: cfg, open: map[string]bool{}, logger: cfg.Logger}
	for _, p := range cfg.OpenPaths {
		m.open[p] = true
	}
	m.authn = &tokenAuthenticator{client: tokens, cfg: cfg, cache: newTTLCache[User](cfg.MaxCacheEntries, cfg.Now)}
	m.authz = &accessAuthorizer{client: access, cfg: cfg, cache: newTTLCache[decision](cfg.MaxCacheEntries, cfg.Now)}
	return m
}

// Wrap returns next guarded by the middleware.
func (m *Middleware) Wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := cleanPath(r.URL.Path)
		if m.open[p] {
			next.ServeHTTP(w, r)
			return
		}
		token, ok := bearerToken(r.Header.Get("Authorization"))
		if !ok {
			unauthorized(w)
			return
		}
		user, err := m.authn.authenticate(r.Context(), token)
		switch {
		case err == errUnauthenticated:
			unauthorized(w)
			return
		case err != nil:
			m.logger.Warn("authn: TokenReview failed", "err", err)
			http.Error(w, "authentication unavailable: the API server could not be asked", http.StatusServiceUnavailable)
			return
		}
		attrs := requestAttributes{Verb: verbFor(r.Method), Path: p}
		d, err := m.authz.authorize(r.Context(), user, attrs)
		if err != nil {
			m.logger.Warn("authn: SubjectAccessReview failed", "err", err)
			http.Error(w, "authorization unavailable: the API server could not be asked", http.StatusServiceUnavailable)
			return
		}
		if !d.Allowed {
			m.logger.Debug("authn: forbidden", "user", user.Name, "verb", attrs.Verb, "path", attrs.Path, "reason", d.Reason)
			http.Error(w, forbiddenMessage(user, attrs, d), http.StatusForbidden)
			return
		}
		next.ServeHTTP(w, r.WithContext(withUser(r.Context(), user)))
	})
}

// cleanPath returns the path that is authorized and matched against OpenPaths, so that
// "/healthz/../metrics" is never taken for an open path.
func cleanPath(p string) string {
	if p == "" {
		return "/"
	}
	return path.Clean("/" + p)
}

// bearerToken extracts the token of an "Authorization: Bearer <token>" header.
func bearerToken(h string) (string, bool) {
	scheme, token, ok := strings.Cut(strings.TrimSpace(h), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	token = strings.TrimSpace(token)
	return token, token != ""
}

// verbFor maps an HTTP method to the non-resource verb RBAC rules name.
func verbFor(method string) string {
	switch method {
	case http.MethodGet, http.MethodHead:
		return "get"
	}
	return strings.ToLower(method)
}

func unauthorized(w http.ResponseWriter) {
	w.Header().Set("WWW-Authenticate", `Bearer realm="netdrift"`)
	http.Error(w, "Unauthorized: a bearer token the API server accepts is required", http.StatusUnauthorized)
}

func forbiddenMessage(u User, a requestAttributes, d decision) string {
	msg := "Forbidden (user=" + u.Name + ", verb=" + a.Verb + ", path=" + a.Path + ")"
	if d.Reason != "" {
		msg += ": " + d.Reason
	}
	return msg
}

// User is the authenticated caller, as the TokenReview described it.
type User struct {
	Name   string
	UID    string
	Groups []string
	Extra  map[string][]string
}

type userKey struct{}

func withUser(ctx context.Context, u User) context.Context {
	return context.WithValue(ctx, userKey{}, u)
}

// UserFrom returns the caller that the middleware authenticated for this request.
func UserFrom(ctx context.Context) (User, bool) {
	u, ok := ctx.Value(userKey{}).(User)
	return u, ok
}
