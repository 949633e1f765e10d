/* Central span lists (Go's mcentral): spans no thread owns, one pair of lists per span
 * class, under one of 32 locks striped over the classes.  The lists are visited rarely
 * (thread exit, adoption, frees into exited threads' spans), so 32 locks are plenty, and
 * fork takes them all (fork.c) - a number ThreadSanitizer, which tracks at most 64 locks
 * held by one thread, can follow.
 *
 * A span lands here when its thread exits (or trims its cache) while objects in it are
 * still live.  Frees into such a span take the lock; once the last object is freed the
 * span goes back to the page heap at once.  A thread that needs a span adopts a partial
 * one from here before asking the page heap for fresh pages, so memory freed by other
 * threads is reused first. */
#include "internal.h"

#define NLOCKS 32

struct central {
    sc_span *partial, *full;
};

static pthread_mutex_t locks[NLOCKS] = { [0 ... NLOCKS - 1] = PTHREAD_MUTEX_INITIALIZER };
static struct central central[SC_NSPANCLASS];

static pthread_mutex_t *lock_of(unsigned spanclass) { return &locks[spanclass % NLOCKS]; }

/* The heads are written under the lock and read before it by sc_central_adopt. */
static void list_push(sc_span **head, sc_span *s)
{
    s->prev = NULL;
    s->next = *head;
    if (*head)
        (*head)->prev = s;
    __atomic_store_n(head, s, __ATOMIC_RELAXED);
}

static void list_remove(sc_span **head, sc_span *s)
{
    if (s->prev)
        s->prev->next = s->next;
    else
        __atomic_store_n(head, s->next, __ATOMIC_RELAXED);
    if (s->next)
        s->next->prev = s->prev;
    s->next = s->prev = NULL;
}

void sc_central_abandon(sc_span *s)
{
    struct central *c = &central[s->spanclass];
    pthread_mutex_t *lock = lock_of(s->spanclass);
    pthread_mutex_lock(lock);
    void *remote = (void *)atomic_exchange_explicit(&s->thread_free, SC_TF_ABANDONED, memory_order_acq_rel);
    if (remote) {
        size_t n = sc_list_length(s, remote);
        sc_count_n(&s->nfreed, n);
        sc_remote_collected_add(s->spanclass, n);
        s->free = sc_list_concat(s, remote, s->free);
    }
    atomic_store_explicit(&s->owner, 0, memory_order_relaxed);
    if (sc_span_live(s) == 0) {
        pthread_mutex_unlock(lock);
        sc_heap_free(s);
        return;
    }
    s->in_full = (uintptr_t)s->free == s->end && s->bump == s->end;
    list_push(s->in_full ? &c->full : &c->partial, s);
    pthread_mutex_unlock(lock);
}

sc_span *sc_central_adopt(unsigned spanclass)
{
    struct central *c = &central[spanclass];
    pthread_mutex_t *lock = lock_of(spanclass);
    /* Most refills find nothing here: look before taking the lock (a span abandoned just
     * now waits for the next refill). */
    if (!__atomic_load_n(&c->partial, __ATOMIC_RELAXED))
        return NULL;
    pthread_mutex_lock(lock);
    sc_span *s = c->partial;
    if (s) {
        list_remove(&c->partial, s);
        atomic_store_explicit(&s->owner, sc_thread_id(), memory_order_relaxed);
        atomic_store_explicit(&s->thread_free, 0, memory_order_release);
    }
    pthread_mutex_unlock(lock);
    return s;
}

/* Frees p into an unowned span.  Returns false if a thread adopted the span meanwhile;
 * the caller then frees p the owned way. */
bool sc_central_free(sc_span *s, void *p)
{
    struct central *c = &central[s->spanclass];
    pthread_mutex_t *lock = lock_of(s->spanclass);
    pthread_mutex_lock(lock);
    if (atomic_load_explicit(&s->thread_free, memory_order_relaxed) != SC_TF_ABANDONED) {
        pthread_mutex_unlock(lock);
        return false;
    }
    if (sc_looks_freed(s, p) && sc_list_contains(s, s->free, p))
        sc_fatal("double free of %p", p);
    sc_span_push(s, p);
    if (sc_span_live(s) == 0) {
        list_remove(s->in_full ? &c->full : &c->partial, s);
        pthread_mutex_unlock(lock);
        sc_heap_free(s);
        return true;
    }
    if (s->in_full) {
        list_remove(&c->full, s);
        list_push(&c->partial, s);
        s->in_full = 0;
    }
    pthread_mutex_unlock(lock);
    return true;
}

/* fork.c: every central lock, in order. */
void sc_central_lock_all(void)
{
    for (unsigned i = 0; i < NLOCKS; i++)
        pthread_mutex_lock(&locks[i]);
}

void sc_central_unlock_all(void)
{
    for (unsigned i = NLOCKS; i-- > 0;)
        pthread_mutex_unlock(&locks[i]);
}
