# shellcheck shell=bash
# nginx_conf.sh: the nginx every benchmark compares with: one worker (unless told otherwise), a
# keep-alive upstream pool, proxy_buffering off (each chunk is passed on as it comes), no access
# log.

# write_nginx_conf DIR LISTEN UPSTREAM CONNECTIONS [SERVER_LINES] [WORKERS] [HEADER_LINES]:
# writes DIR/nginx.conf (temp paths and pid in DIR, the error log beside it in DIR.err). LISTEN:
# what follows `listen` (address:port and options); UPSTREAM: the model server's host:port;
# CONNECTIONS: worker_connections; SERVER_LINES: more lines for the server block (TLS);
# WORKERS: worker_processes (default 1); HEADER_LINES: the header lines of the location
# (default: an empty Connection, for upstream keep-alive; nginx_websocket_headers passes
# WebSocket upgrades on).
# shellcheck disable=SC2016,SC2034
nginx_websocket_headers='proxy_set_header Upgrade $http_upgrade;
      proxy_set_header Connection "upgrade";'
write_nginx_conf() {
  local dir=$1 listen=$2 upstream=$3 connections=$4 server_lines=${5:-} workers=${6:-1}
  local header_lines=${7:-'proxy_set_header Connection "";'}
  mkdir -p "$dir"
  cat >"$dir/nginx.conf" <<CONF
worker_processes $workers;
worker_rlimit_nofile $(ulimit -n);
pid $dir/nginx.pid;
error_log $dir.err warn;
events { worker_connections $connections; }
http {
  access_log off;
  client_body_temp_path $dir/body;
  proxy_temp_path $dir/proxy;
  fastcgi_temp_path $dir/fastcgi;
  uwsgi_temp_path $dir/uwsgi;
  scgi_temp_path $dir/scgi;
  upstream model { server $upstream; keepalive 1024; }
  server {
    listen $listen backlog=4096;
    $server_lines
    keepalive_requests 100000;
    location / {
      proxy_pass http://model;
      proxy_http_version 1.1;
      $header_lines
      proxy_buffering off;
      proxy_read_timeout 300s;
    }
  }
}
CONF
}
