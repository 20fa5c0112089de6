import type { ComponentType, TargetedMouseEvent } from 'preact';
import { logout, session } from './api.js';
import { liveStatus } from './live.js';
import { AdminPage } from './pages/admin.js';
import { AlertsPage } from './pages/alerts.js';
import { ContentPage } from './pages/content.js';
import { LivePage } from './pages/live.js';
import { LoginPage } from './pages/login.js';
import { OverviewPage } from './pages/overview.js';
import { currentPath, navigate, pages } from './router.js';

const views: Record<(typeof pages)[number]['path'], ComponentType> = {
  '/': OverviewPage,
  '/live': LivePage,
  '/content': ContentPage,
  '/alerts': AlertsPage,
  '/admin': AdminPage,
};

function NavLink({ to, children }: { to: string; children: string }) {
  const onClick = (e: TargetedMouseEvent<HTMLAnchorElement>): void => {
    if (e.button !== 0 || e.metaKey || e.ctrlKey || e.shiftKey || e.altKey) return;
    e.preventDefault();
    navigate(to);
  };
  return (
    <a href={to} onClick={onClick} aria-current={currentPath.value === to ? 'page' : undefined}>
      {children}
    </a>
  );
}

function NotFound() {
  return (
    <div class="page-head">
      <h1>Page not found</h1>
    </div>
  );
}

export function App() {
  const s = session.value;
  if (!s) return <LoginPage />;
  const View = views[currentPath.value as keyof typeof views] ?? NotFound;
  return (
    <>
      <a class="skip" href="#main">
        Skip to content
      </a>
      <header class="top">
        <div class="brand">
          <span class="logo" aria-hidden="true">
            ◉
          </span>{' '}
          Darshak <span class="tenant">{s.tenant}</span>
        </div>
        <nav aria-label="Main">
          {pages.map((p) => (
            <NavLink key={p.path} to={p.path}>
              {p.label}
            </NavLink>
          ))}
        </nav>
        <div class="who">
          <span class={`dot ${liveStatus.value}`} title={`Live feed: ${liveStatus.value}`} aria-hidden="true" />
          <span class="email">{s.email}</span>
          <button type="button" class="btn btn-quiet" onClick={logout}>
            Sign out
          </button>
        </div>
      </header>
      <main id="main" tabIndex={-1}>
        <View />
      </main>
    </>
  );
}
