package authn

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"sort"
	"strings"

	"golang.org/x/sync/singleflight"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	authenticationv1client "k8s.io/client-go/kubernetes/typed/authentication/v1"
	authorizationv1client "k8s.io/client-go/kubernetes/typed/authorization/v1"
)

// errUnauthenticated: the API server looked at the token and rejected it.
var errUnauthenticated = errors.New("token not authenticated")

// tokenAuthenticator turns bearer tokens into users with cached TokenReviews.
// Tokens are cached only as SHA-256 digests.
type tokenAuthenticator struct {
	client authenticationv1client.TokenReviewInterface
	cfg    Config
	cache  *ttlCache[User]
	flight singleflight.Group
}

func (a *tokenAuthenticator) authenticate(ctx context.Context, token string) (User, error) {
	key := digest(token)
	if u, ok, found := a.cache.get(key); found {
		return u, okOr(ok, errUnauthenticated)
	}
	v, err, _ := a.flight.Do(key, func() (any, error) {
		// Re-check: a flight that finished between our miss and Do stored the answer.
		if u, ok, found := a.cache.get(key); found {
			return u, okOr(ok, errUnauthenticated)
		}
		// Detached from the first caller's cancellation: others may be waiting on this flight.
		u, err := a.review(context.WithoutCancel(ctx), token)
		switch {
		case err == nil:
			a.cache.put(key, u, true, a.cfg.AuthnTTL)
		case err == errUnauthenticated:
			a.cache.put(key, User{}, false, a.cfg.AuthnFailureTTL)
		}
		return u, err
	})
	u, _ := v.(User)
	return u, err
}

func (a *tokenAuthenticator) review(ctx context.Context, token string) (User, error) {
	ctx, cancel := context.WithTimeout(ctx, a.cfg.ReviewTimeout)
	defer cancel()
	tr := &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: token, Audiences: a.cfg.Audiences}}
	got, err := a.client.Create(ctx, tr, metav1.CreateOptions{})
	if err != nil {
		return User{}, fmt.Errorf("TokenReview: %w", err)
	}
	st := got.Status
	if !st.Authenticated {
		return User{}, errUnauthenticated
	}
	if len(a.cfg.Audiences) > 0 && !intersects(a.cfg.Audiences, st.Audiences) {
		return User{}, errUnauthenticated
	}
	u := User{Name: st.User.Username, UID: st.User.UID, Groups: st.User.Groups}
	if len(st.User.Extra) > 0 {
		u.Extra = make(map[string][]string, len(st.User.Extra))
		for k, v := range st.User.Extra {
			u.Extra[k] = []string(v)
		}
	}
	return u, nil
}

// requestAttributes is what is authorized: a non-resource path and verb.
type requestAttributes struct {
	Verb string
	Path string
}

type decision struct {
	Allowed bool
	Reason  string
}

// accessAuthorizer decides with cached SubjectAccessReviews.
type accessAuthorizer struct {
	client authorizationv1client.SubjectAccessReviewInterface
	cfg    Config
	cache  *ttlCache[decision]
	flight singleflight.Group
}

func (a *accessAuthorizer) authorize(ctx context.Context, u User, attrs requestAttributes) (decision, error) {
	key := decisionKey(u, attrs)
	if d, _, found := a.cache.get(key); found {
		return d, nil
	}
	v, err, _ := a.flight.Do(key, func() (any, error) {
		if d, _, found := a.cache.get(key); found {
			return d, nil
		}
		d, err := a.review(context.WithoutCancel(ctx), u, attrs)
		if err == nil {
			ttl := a.cfg.AuthzTTL
			if !d.Allowed {
				ttl = a.cfg.AuthzFailureTTL
			}
			a.cache.put(key, d, d.Allowed, ttl)
		}
		return d, err
	})
	d, _ := v.(decision)
	return d, err
}

func (a *accessAuthorizer) review(ctx context.Context, u User, attrs requestAttributes) (decision, error) {
	ctx, cancel := context.WithTimeout(ctx, a.cfg.ReviewTimeout)
	defer cancel()
	sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		NonResourceAttributes: &authorizationv1.NonResourceAttributes{Path: attrs.Path, Verb: attrs.Verb},
		User:                  u.Name,
		UID:                   u.UID,
		Groups:                u.Groups,
	}}
	if len(u.Extra) > 0 {
		sar.Spec.Extra = make(map[string]authorizationv1.ExtraValue, len(u.Extra))
		for k, v := range u.Extra {
			sar.Spec.Extra[k] = authorizationv1.ExtraValue(v)
		}
	}
	got, err := a.client.Create(ctx, sar, metav1.CreateOptions{})
	if err != nil {
		return decision{}, fmt.Errorf("SubjectAccessReview: %w", err)
	}
	st := got.Status
	if st.EvaluationError != "" && !st.Allowed && st.Reason == "" {
		st.Reason = st.EvaluationError
	}
	return decision{Allowed: st.Allowed && !st.Denied, Reason: st.Reason}, nil
}

// decisionKey identifies (who, what) for the decision cache. Every field that can change
// the answer is in it: user, uid, groups, extra, verb, path.
func decisionKey(u User, a requestAttributes) string {
	var b strings.Builder
	for _, s := range []string{u.Name, u.UID, a.Verb, a.Path} {
		fmt.Fprintf(&b, "%d:%s|", len(s), s)
	}
	groups := append([]string(nil), u.Groups...)
	sort.Strings(groups)
	fmt.Fprintf(&b, "g%d:", len(groups))
	for _, g := range groups {
		fmt.Fprintf(&b, "%d:%s|", len(g), g)
	}
	keys := make([]string, 0, len(u.Extra))
	for k := range u.Extra {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(&b, "x%d:%s=%d:", len(k), k, len(u.Extra[k]))
		for _, v := range u.Extra[k] {
			fmt.Fprintf(&b, "%d:%s|", len(v), v)
		}
	}
	return digest(b.String())
}

func digest(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

func intersects(want, got []string) bool {
	for _, w := range want {
		for _, g := range got {
			if w == g {
				return true
			}
		}
	}
	return false
}

func okOr(ok bool, err error) error {
	if ok {
		return nil
	}
	return err
}
