/* The floor of any relay on this machine, for bench/proxy_alone.py: one epoll thread that accepts, connects to one
 * fixed upstream (127.0.0.1:argv[1]) and copies both ways through a buffer per direction (at most one held:
 * back-pressure), passing each end of stream on. No request parsing, no checks, no Python: what the extra hop alone
 * costs (a second TCP connection, two more passes through loopback, the wake-ups). Prints the port it listens on. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>
#define BUF (256 * 1024)
struct side { int fd; struct side *peer; char *buf; int len, off, eof, done; };
static int ep;
static void arm(struct side *s) {
  /* s reads into its peer's buffer, and writes what its own buffer holds for it */
  struct epoll_event ev = {0};
  ev.data.ptr = s;
  if (!s->eof && s->peer->len == 0) ev.events |= EPOLLIN;
  if (s->len > 0) ev.events |= EPOLLOUT;
  epoll_ctl(ep, EPOLL_CTL_MOD, s->fd, &ev);
}
static void finish(struct side *a) {
  struct side *b = a->peer;
  close(a->fd); close(b->fd); free(a->buf); free(b->buf); free(a < b ? a : b);
}
int main(int argc, char **argv) {
  int port = atoi(argv[1]);
  int ls = socket(AF_INET, SOCK_STREAM, 0), one = 1;
  setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  struct sockaddr_in a = {0}; a.sin_family = AF_INET; a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(ls, (void *)&a, sizeof a); listen(ls, 128);
  socklen_t l = sizeof a; getsockname(ls, (void *)&a, &l); printf("%d\n", ntohs(a.sin_port)); fflush(stdout);
  ep = epoll_create1(0);
  struct epoll_event ev = {.events = EPOLLIN, .data.ptr = NULL}; epoll_ctl(ep, EPOLL_CTL_ADD, ls, &ev);
  struct sockaddr_in up = {0}; up.sin_family = AF_INET; up.sin_port = htons(port); up.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  struct epoll_event evs[64];
  for (;;) {
    int n = epoll_wait(ep, evs, 64, -1);
    for (int i = 0; i < n; i++) {
      struct side *s = evs[i].data.ptr;
      if (!s) {
        int c = accept4(ls, NULL, NULL, SOCK_NONBLOCK); if (c < 0) continue;
        int u = socket(AF_INET, SOCK_STREAM, 0);
        if (connect(u, (void *)&up, sizeof up) < 0) { close(c); close(u); continue; }
        setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one); setsockopt(u, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        int fl = 1; ioctl(u, FIONBIO, &fl);
        struct side *pair = calloc(2, sizeof *pair);
        pair[0].fd = c; pair[1].fd = u; pair[0].peer = &pair[1]; pair[1].peer = &pair[0];
        pair[0].buf = malloc(BUF); pair[1].buf = malloc(BUF);
        struct epoll_event e1 = {.events = EPOLLIN, .data.ptr = &pair[0]}, e2 = {.events = EPOLLIN, .data.ptr = &pair[1]};
        epoll_ctl(ep, EPOLL_CTL_ADD, c, &e1); epoll_ctl(ep, EPOLL_CTL_ADD, u, &e2);
        continue;
      }
      struct side *p = s->peer;
      if (evs[i].events & (EPOLLOUT | EPOLLERR | EPOLLHUP) && s->len > 0) {  /* write what is held for s */
        int w = write(s->fd, s->buf + s->off, s->len - s->off);
        if (w > 0) s->off += w;
        if (s->off == s->len) { s->len = s->off = 0; if (p->eof) { shutdown(s->fd, SHUT_WR); s->done = 1; } }
      }
      if (evs[i].events & (EPOLLIN | EPOLLERR | EPOLLHUP) && !s->eof && p->len == 0) {  /* read s into p's buffer */
        int r = read(s->fd, p->buf, BUF);
        if (r > 0) {
          int w = write(p->fd, p->buf, r); if (w < 0) w = 0;
          if (w < r) { p->len = r; p->off = w; }
        } else if (r == 0 || errno != EAGAIN) { s->eof = 1; shutdown(p->fd, SHUT_WR); p->done = 1; }
      }
      if (s->done && p->done) { finish(s); continue; }
      arm(s); arm(p);
    }
  }
}
