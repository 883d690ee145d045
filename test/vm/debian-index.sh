# test/vm/debian-index.sh: sourced by kernel.sh and debs.sh. mirror: the
# first Debian archive URI in apt's sources; index SUITE ARCH FILE: that
# suite's main Packages index into FILE; pick REGEX FILE: "version package
# filename" of each stanza of FILE whose package matches.
mirror() {
    { grep -hE '^URIs:' /etc/apt/sources.list.d/*.sources 2>/dev/null | awk '{print $2}'
      grep -hE '^deb ' /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null |
          sed -E 's/^deb (\[[^]]*\] )?//' | awk '{print $1}'; } |
        grep -E '/debian/?$' | head -n 1 | sed 's,/$,,' || true
}
index() {
    curl -fsS "$(mirror)/dists/$1/main/binary-$2/Packages.xz" | xz -dc >"$3"
}
pick() {
    awk -v RS= -v re="$1" '{
        p = v = f = ""
        n = split($0, l, "\n")
        for (i = 1; i <= n; i++) {
            if (l[i] ~ /^Package: /) p = substr(l[i], 10)
            else if (l[i] ~ /^Version: /) v = substr(l[i], 10)
            else if (l[i] ~ /^Filename: /) f = substr(l[i], 11)
        }
        if (p ~ re) print v, p, f
    }' "$2"
}
