package scenarios

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/netdrift/netdrift/lab/labenv"
)

// churn adds and removes backends of Service name on node, one pod at a
// time, until stopped: what a Deployment's rollout does to its Service.
// Calls fail while the API server is away; the loop goes on.
type churn struct {
	stop context.CancelFunc
	wg   sync.WaitGroup
	mu   sync.Mutex
	done int // pods created and deleted
	errs int // calls that failed
}

func startChurn(l *labenv.Lab, name, node string) *churn {
	ctx, cancel := context.WithCancel(context.Background())
	c := &churn{stop: cancel}
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		for i := 1; ctx.Err() == nil; i++ {
			pod := fmt.Sprintf("%s-c%d", name, i)
			_, err := l.CreatePod(ctx, labenv.PodSpec{Name: pod, Node: node, Labels: map[string]string{"app": name, "churn": "yes"}})
			time.Sleep(600 * time.Millisecond)
			if err == nil {
				err = l.DeletePod(context.Background(), "default", pod, labenv.Grace(0))
			}
			c.mu.Lock()
			if err == nil {
				c.done++
			} else {
				c.errs++
			}
			c.mu.Unlock()
			time.Sleep(400 * time.Millisecond)
		}
	}()
	return c
}

// end stops the churn and deletes whatever pod of it is left (one created
// just before the API server went away may be); it returns how many pods
// came and went, and how many calls failed.
func (c *churn) end(t *testing.T, l *labenv.Lab, name string) (done, errs int) {
	t.Helper()
	c.stop()
	c.wg.Wait()
	err := l.Clientset().CoreV1().Pods("default").DeleteCollection(context.Background(),
		metav1.DeleteOptions{GracePeriodSeconds: labenv.Grace(0)}, metav1.ListOptions{LabelSelector: "app=" + name + ",churn=yes"})
	if err != nil {
		t.Fatal(err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.done, c.errs
}
