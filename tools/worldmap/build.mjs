// build.mjs turns Natural Earth's 110m countries (the world-atlas package) into
// projected SVG path data per ISO 3166-1 alpha-2 code, written to the two files
// the Go services embed, and its 50m countries into the collector's
// point-to-country shapes (at the end of this file). Run once after changing
// it: `npm ci && npm run build`.
//
// Projection: equirectangular, x = (lon + 180) * W / 360, y = (LAT_TOP - lat) * W / 360,
// cropped to LAT_TOP..LAT_BOTTOM (Antarctica left out). Anyone placing a point
// (a location cell's circle) uses the same two lines; the numbers are in the file.
import { readFileSync, writeFileSync, mkdirSync } from "node:fs";
import { dirname, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { feature } from "topojson-client";

const here = dirname(fileURLToPath(import.meta.url));
const root = resolve(here, "../..");
const outputs = [
  "services/admininterface/web/static/worldmap.json",
  "services/visualrenderer/chart/worldmap/worldmap.json",
];

const W = 1000;
const LAT_TOP = 84;
const LAT_BOTTOM = -58;
const H = Math.round(((LAT_TOP - LAT_BOTTOM) * W) / 360);
const k = W / 360;
const px = (lon) => (lon + 180) * k;
const py = (lat) => (LAT_TOP - lat) * k;

const world = JSON.parse(readFileSync(resolve(here, "node_modules/world-atlas/countries-110m.json"), "utf8"));
const iso = JSON.parse(readFileSync(resolve(here, "iso3166.json"), "utf8"));
const atlasVersion = JSON.parse(readFileSync(resolve(here, "node_modules/world-atlas/package.json"), "utf8")).version;

const fc = feature(world, world.objects.countries);
const countries = {};

// ring turns one ring into relative path commands with coordinates in tenths of a unit.
function ring(coords) {
  const pts = coords.map(([lon, lat]) => [Math.round(px(lon) * 10), Math.round(py(Math.max(LAT_BOTTOM - 2, Math.min(LAT_TOP + 2, lat))) * 10)]);
  const kept = [];
  for (const p of pts) {
    const last = kept[kept.length - 1];
    if (!last || last[0] !== p[0] || last[1] !== p[1]) kept.push(p);
  }
  if (kept.length < 3) return { d: "", area: 0, cx: 0, cy: 0 };
  let d = `M${fmt(kept[0][0])} ${fmt(kept[0][1])}l`;
  const parts = [];
  for (let i = 1; i < kept.length; i++) {
    parts.push(`${fmt(kept[i][0] - kept[i - 1][0])} ${fmt(kept[i][1] - kept[i - 1][1])}`);
  }
  d += parts.join(" ").replace(/ -/g, "-") + "z";
  // Shoelace area and centroid, for the circle's anchor.
  let a = 0, cx = 0, cy = 0;
  for (let i = 0; i < kept.length; i++) {
    const [x0, y0] = kept[i];
    const [x1, y1] = kept[(i + 1) % kept.length];
    const c = x0 * y1 - x1 * y0;
    a += c; cx += (x0 + x1) * c; cy += (y0 + y1) * c;
  }
  a /= 2;
  return { d, area: Math.abs(a), cx: a ? cx / (6 * a) / 10 : kept[0][0] / 10, cy: a ? cy / (6 * a) / 10 : kept[0][1] / 10 };
}

// unwrap makes a ring that crosses the antimeridian (Russia's Chukotka, Fiji)
// continuous, then adds a copy shifted by 360 degrees so the part past the
// map's edge shows at the other edge; the viewBox clips both.
function unwrap(coords) {
  const out = continuous(coords);
  const lons = out.map((p) => p[0]);
  const rings = [[out, false]];
  if (Math.max(...lons) > 180) rings.push([out.map(([x, y]) => [x - 360, y]), true]);
  if (Math.min(...lons) < -180) rings.push([out.map(([x, y]) => [x + 360, y]), true]);
  return rings;
}

function fmt(v) {
  // v is in tenths: print with at most one decimal.
  const s = (v / 10).toFixed(1);
  return s.endsWith(".0") ? s.slice(0, -2) : s.replace(/^(-?)0\./, "$1.");
}

for (const f of fc.features) {
  const code = f.id !== undefined ? iso.numeric[f.id] : iso.byName[f.properties.name];
  if (!code) throw new Error(`no alpha-2 code for ${f.id} ${f.properties.name}`);
  if (code === "AQ") continue;
  const polys = f.geometry.type === "Polygon" ? [f.geometry.coordinates] : f.geometry.coordinates;
  const entry = countries[code] || { name: iso.names[code] || f.properties.name, d: "", area: 0, cx: 0, cy: 0 };
  for (const poly of polys) {
    poly.forEach((r, i) => {
      for (const [shifted, copy] of unwrap(r)) {
        const out = ring(shifted);
        if (!out.d) continue;
        entry.d += out.d;
        if (!copy && i === 0 && out.area > entry.area) {
          entry.area = out.area; entry.cx = out.cx; entry.cy = out.cy;
        }
      }
    });
  }
  countries[code] = entry;
}

const sorted = {};
for (const code of Object.keys(countries).sort()) {
  const { name, d, cx, cy } = countries[code];
  sorted[code] = { name, d, cx: Math.round(cx * 10) / 10, cy: Math.round(cy * 10) / 10 };
}

const out = {
  source: `Natural Earth 1:110m admin 0 countries (public domain) via world-atlas ${atlasVersion}`,
  projection: { name: "equirectangular", width: W, height: H, lon_left: -180, lat_top: LAT_TOP, lat_bottom: LAT_BOTTOM, units_per_degree: k },
  countries: sorted,
};
const text = JSON.stringify(out) + "\n";
for (const rel of outputs) {
  const path = resolve(root, rel);
  mkdirSync(dirname(path), { recursive: true });
  writeFileSync(path, text);
  console.log(`${rel}: ${Object.keys(sorted).length} countries, ${text.length} bytes`);
}

// ---------------------------------------------------------------------------
// The collector's point-to-country shapes: Natural Earth 1:50m countries as
// lon/lat polygons on world-atlas's own quantization grid (lossless: the
// integers are the topology's), delta-encoded varints, read by
// services/collector/geoip/countries. Format (little-endian):
//
//   "TVC1"
//   float64 lon0, lat0, dlon, dlat      lon = lon0 + x*dlon, lat = lat0 + y*dlat
//   uvarint countries
//   per country: 2 ASCII bytes (alpha-2), uvarint polygons
//     per polygon: uvarint rings (the outer ring first, then its holes; a
//       point is in the polygon when it is inside an odd number of them)
//       per ring: uvarint points, then per point zigzag varint dx, dy from
//       the previous point (the first from 0, 0); the ring closes itself.
//
// Rings are unwrapped across the antimeridian; a polygon reaching past +-180
// is written a second time shifted by 360 degrees, so a reader tests points
// with plain planar ray casting in -180..180. A ring that goes once around
// the globe (Antarctica) is closed through its pole.
const shapesOut = "services/collector/geoip/countries/countries.bin";
const world50 = JSON.parse(readFileSync(resolve(here, "node_modules/world-atlas/countries-50m.json"), "utf8"));
const { scale: [dlon, dlat], translate: [lon0, lat0] } = world50.transform;

// continuous shifts each point's longitude by whole turns so that no edge
// is longer than 180 degrees.
function continuous(coords) {
  const out = [coords[0].slice()];
  for (let i = 1; i < coords.length; i++) {
    let lon = coords[i][0];
    const prev = out[i - 1][0];
    while (lon - prev > 180) lon -= 360;
    while (prev - lon > 180) lon += 360;
    out.push([lon, coords[i][1]]);
  }
  return out;
}

function unwrapLon(coords) {
  const out = continuous(coords);
  const first = out[0], last = out[out.length - 1];
  if (Math.abs(last[0] - first[0]) > 180) {
    const pole = out.reduce((s, p) => s + p[1], 0) < 0 ? -90 : 90;
    out.push([last[0], pole], [first[0], pole]);
  }
  return out;
}

function shiftRing(r, by) { return r.map(([x, y]) => [x + by, y]); }

// polygonCopies returns the polygon (rings unwrapped, holes moved next to
// their outer ring) and its copies shifted into -180..180.
function polygonCopies(poly) {
  const rings = poly.map(unwrapLon);
  const ref = rings[0][0][0];
  for (let i = 1; i < rings.length; i++) {
    let by = 0;
    while (rings[i][0][0] + by - ref > 180) by -= 360;
    while (ref - (rings[i][0][0] + by) > 180) by += 360;
    if (by) rings[i] = shiftRing(rings[i], by);
  }
  const lons = rings[0].map((p) => p[0]);
  const out = [rings];
  if (Math.max(...lons) > 180) out.push(rings.map((r) => shiftRing(r, -360)));
  if (Math.min(...lons) < -180) out.push(rings.map((r) => shiftRing(r, 360)));
  return out;
}

function quantRing(r) {
  const pts = [];
  for (const [lon, lat] of r) {
    const p = [Math.round((lon - lon0) / dlon), Math.round((lat - lat0) / dlat)];
    const last = pts[pts.length - 1];
    if (!last || last[0] !== p[0] || last[1] !== p[1]) pts.push(p);
  }
  while (pts.length > 1 && pts[0][0] === pts[pts.length - 1][0] && pts[0][1] === pts[pts.length - 1][1]) pts.pop();
  return pts;
}

const bytes = [];
const uvarint = (v) => { while (v >= 0x80) { bytes.push((v & 0x7f) | 0x80); v = Math.floor(v / 128); } bytes.push(v); };
const svarint = (v) => uvarint(v < 0 ? -2 * v - 1 : 2 * v);

const shapes = new Map();
for (const f of feature(world50, world50.objects.countries).features) {
  const key = f.id !== undefined ? f.id : f.properties.name;
  const code = f.id !== undefined ? iso.numeric[f.id] : iso.byName[f.properties.name];
  if (code === null) continue;
  if (!code) throw new Error(`no alpha-2 code for ${key} ${f.properties.name}`);
  const polys = f.geometry.type === "Polygon" ? [f.geometry.coordinates] : f.geometry.coordinates;
  const list = shapes.get(code) || [];
  for (const poly of polys) {
    for (const copy of polygonCopies(poly)) {
      const rings = copy.map(quantRing);
      // An outer ring too small for the grid takes its holes with it.
      if (rings[0].length >= 3) list.push(rings.filter((r) => r.length >= 3));
    }
  }
  shapes.set(code, list);
}
const header = Buffer.alloc(36);
header.write("TVC1", 0, "ascii");
[lon0, lat0, dlon, dlat].forEach((v, i) => header.writeDoubleLE(v, 4 + 8 * i));
const codes = [...shapes.keys()].sort();
uvarint(codes.length);
let points = 0, polygons = 0;
for (const code of codes) {
  bytes.push(code.charCodeAt(0), code.charCodeAt(1));
  const list = shapes.get(code);
  uvarint(list.length);
  polygons += list.length;
  for (const rings of list) {
    uvarint(rings.length);
    for (const r of rings) {
      uvarint(r.length);
      points += r.length;
      let px = 0, py = 0;
      for (const [x, y] of r) { svarint(x - px); svarint(y - py); px = x; py = y; }
    }
  }
}
const bin = Buffer.concat([header, Buffer.from(bytes)]);
const shapesPath = resolve(root, shapesOut);
mkdirSync(dirname(shapesPath), { recursive: true });
writeFileSync(shapesPath, bin);
console.log(`${shapesOut}: ${codes.length} countries, ${polygons} polygons, ${points} points, ${bin.length} bytes`);
