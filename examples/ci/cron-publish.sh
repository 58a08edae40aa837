#!/usr/bin/env bash
# sitegen nightly publish: build from a mounted archive with a persisted cache, verify, then
# copy the new build to the web host and switch it live atomically (symlink + rename).
#
# crontab -e:
#   15 2 * * *  ARCHIVE=/mnt/training-logs REMOTE=deploy@web.example.org /opt/sitegen/cron-publish.sh >>/var/log/sitegen-publish.log 2>&1
#
# Exit codes: 0 published (or another build of this site was still running: nothing done);
#             1 published, but some log files were damaged (--strict);
#             2 bad usage/config or archive not mounted; 3 I/O error;
#             5 published, but a [gates] rule failed on a new run (CONFIG with [gates]);
#             anything else: copy failed.
# With CONFIG (a sitegen.toml with [gates]) the build is gated; with SITEGEN_WEBHOOK set, the
# changes since the last published build are posted to that chat webhook (NOTIFY_KIND: slack,
# feishu, dingtalk, wecom or generic; a signing secret in SITEGEN_WEBHOOK_SECRET) when a new
# build went live. A failed notification is logged, never fatal.
# Nothing is ever copied into the live folder: a stale x.js.gz beside a new x.js would serve
# two different bodies. The previous build stays live until the new one is complete.
set -euo pipefail

ARCHIVE=${ARCHIVE:-/mnt/training-logs}          # the mounted archive (read only is fine)
WORK=${WORK:-/var/lib/sitegen}                  # local site: $WORK/$NAME -> $WORK/.$NAME.builds/<id>
SITEGEN_CACHE=${SITEGEN_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/sitegen}   # keep it between runs
NAME=${NAME:-reports}                           # URL sub-path on the web host (/reports/)
KEEP=${KEEP:-3}                                 # builds kept for rollback, here and remotely
REMOTE=${REMOTE:-}                              # user@host; empty: publish only locally
REMOTE_ROOT=${REMOTE_ROOT:-/srv/www}            # nginx `root` on the web host
SITEGEN=${SITEGEN:-sitegen}
SSH=${SSH:-ssh}                                 # e.g. "ssh -i /etc/sitegen/deploy_key"
CONFIG=${CONFIG:-}                              # sitegen.toml (title, base_url, [gates], [notify]); empty: defaults
NOTIFY_KIND=${NOTIFY_KIND:-}                    # overrides [notify] kind
SITEGEN_WEBHOOK=${SITEGEN_WEBHOOK:-}            # chat webhook; empty: no notification

log() { printf '%s cron-publish: %s\n' "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "$*"; }

mkdir -p "$WORK" "$SITEGEN_CACHE"
exec 9>"$WORK/.cron-publish.lock"
if ! flock -n 9; then log "another publish is still running; skipping"; exit 0; fi

if [ ! -d "$ARCHIVE" ] || [ -z "$(ls -A "$ARCHIVE" 2>/dev/null)" ]; then
    log "archive $ARCHIVE is missing or empty (not mounted?)"; exit 2
fi

config=()
[ -n "$CONFIG" ] && config=(--config "$CONFIG")
before=$(readlink "$WORK/$NAME" 2>/dev/null || true)
status=0
"$SITEGEN" build "$ARCHIVE" --out "$WORK/$NAME" --cache "$SITEGEN_CACHE" --keep "$KEEP" --strict --gate --quiet "${config[@]}" || status=$?
if [ "$status" -eq 4 ]; then log "another build of this site is still running; nothing done this time"; exit 0; fi
if [ "$status" -gt 1 ] && [ "$status" -ne 5 ]; then log "build failed with exit code $status; the live site is unchanged"; exit "$status"; fi
[ "$status" -eq 1 ] && log "built, but some log files were damaged (see the site's problem list)"
[ "$status" -eq 5 ] && log "built, but a gate failed (see changes.md and the site's What's new panel)"
"$SITEGEN" verify "$WORK/$NAME" --quiet

notify() {  # only when a new build went live: a kept site still holds the last build's changes
    if [ -z "$SITEGEN_WEBHOOK" ] || [ "$(readlink "$WORK/$NAME")" = "$before" ]; then return 0; fi
    kind=()
    [ -n "$NOTIFY_KIND" ] && kind=(--kind "$NOTIFY_KIND")
    SITEGEN_WEBHOOK="$SITEGEN_WEBHOOK" "$SITEGEN" notify "$WORK/$NAME" --quiet "${config[@]}" "${kind[@]}" \
        || log "the notification was not delivered (the site is published)"
}

if [ -z "$REMOTE" ]; then log "published $WORK/$NAME -> $(readlink "$WORK/$NAME")"; notify; exit "$status"; fi

id=$(basename "$(readlink "$WORK/$NAME")")     # e.g. 000042-3f2a9c1b0d4e
builds="$REMOTE_ROOT/.$NAME.builds"
$SSH "$REMOTE" "mkdir -p '$builds'"
# Copy into a new folder beside the live build; files unchanged since the live build are hard
# links to it (--link-dest), so only what changed goes over the wire.
rsync -a --delete --link-dest="$REMOTE_ROOT/$NAME/" -e "$SSH" \
    "$WORK/$NAME/" "$REMOTE:$builds/.incoming-$id/"
# On the web host: finish the folder, swap the symlink with one rename, prune old builds.
$SSH "$REMOTE" bash -s -- "$REMOTE_ROOT" "$NAME" "$id" "$KEEP" <<'REMOTE_SCRIPT'
set -euo pipefail
root=$1 name=$2 id=$3 keep=$4
builds="$root/.$name.builds"
rm -rf "$builds/$id"
mv "$builds/.incoming-$id" "$builds/$id"
if [ -d "$root/$name" ] && [ ! -L "$root/$name" ]; then
    echo "$root/$name is a real folder: move it away once (mv $root/$name $builds/000000-legacy)" >&2; exit 2
fi
ln -sfn ".$name.builds/$id" "$root/.$name.link-$$"
mv -T "$root/.$name.link-$$" "$root/$name"      # rename(2): atomic for nginx
live=$(readlink "$root/$name")
cd "$builds"
ls -1d [0-9]*-* 2>/dev/null | sort | head -n -"$keep" | while read -r old; do
    [ ".$name.builds/$old" = "$live" ] || rm -rf -- "$old"
done
REMOTE_SCRIPT
log "published $REMOTE:$REMOTE_ROOT/$NAME -> .$NAME.builds/$id"
notify
exit "$status"
